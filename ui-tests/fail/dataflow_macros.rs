// A `macro_rules!` of the body that reads a `save` output: rustc expands
// it, and `Saved<Tensor>` cannot be formatted with `{}` (its `Debug` shows
// the metadata only). (A `remat!` inside a user's macro, refused by the old
// check, now compiles: ui-tests/pass/macro_from_outside.rs.)
use remat::{checkpoint, remat};
use tch::Tensor;

fn f(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn body_macro(x: &Tensor) -> Tensor {
    let a = remat!(save f: f(x));
    macro_rules! show {
        () => {
            println!("{}", a)
        };
    }
    show!();
    x + 1
}

fn main() {}
