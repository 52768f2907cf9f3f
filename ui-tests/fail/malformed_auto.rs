// Malformed `auto`: `#[checkpoint(auto)]` with a value or together with
// `enabled`; and `let y = auto;`, which is plain Rust (no region without a
// call), where `auto` is no value.
use remat::{checkpoint, remat};
use tch::Tensor;

#[checkpoint]
fn a(x: &Tensor) -> Tensor {
    remat! {
        let y = auto;
    }
    x.relu()
}

#[checkpoint(auto = true)]
fn b(x: &Tensor) -> Tensor {
    x.relu()
}

#[checkpoint(enabled = true, auto)]
fn c(x: &Tensor) -> Tensor {
    x.relu()
}

fn main() {}
