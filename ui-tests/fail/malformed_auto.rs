// Malformed `auto`: a region without its call, and `#[checkpoint(auto)]`
// with a value or together with `enabled`.
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
