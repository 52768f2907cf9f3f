// Two regions with the same static name in one checkpoint.
use remat::{checkpoint, remat};
use tch::Tensor;

fn mlp(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let a = recompute mlp: mlp(x);
        let b = recompute mlp: mlp(&a);
    }
    b
}

fn main() {}
