// A checkpoint closure must be `Send` (replay may run on an autograd
// worker thread): an `Rc` cannot be captured; use an `Arc`.
use remat::checkpoint;
use std::rc::Rc;
use tch::Tensor;

#[checkpoint]
fn scaled(x: &Tensor, scale: Rc<f64>) -> Tensor {
    x * *scale
}

fn main() {}
