// Macros the check cannot see through (issue 8): a `macro_rules!` of the
// body that reads a `save` output, and a `remat!` inside a user's macro.
use remat::{checkpoint, remat};
use tch::Tensor;

fn f(h: &Tensor) -> Tensor {
    h.tanh()
}

macro_rules! twice {
    ($($t:tt)*) => { $($t)* };
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

#[checkpoint]
fn user_macro(x: &Tensor) -> Tensor {
    twice! { remat! { let a = save f: f(x); } }
    x + 1
}

fn main() {}
