// Unknown, duplicate and malformed `#[checkpoint]` options.
use remat::checkpoint;
use tch::Tensor;

#[checkpoint(nmae = "a")]
fn a(x: &Tensor) -> Tensor {
    x.relu()
}

#[checkpoint(name = "b", name = "c")]
fn b(x: &Tensor) -> Tensor {
    x.relu()
}

#[checkpoint(determinism = Exact)]
fn c(x: &Tensor) -> Tensor {
    x.relu()
}

#[checkpoint(name = "")]
fn d(x: &Tensor) -> Tensor {
    x.relu()
}

fn main() {}
