// Bare code reads the output of a `save` region without `needs`.
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
    }
    x + attn
}

fn main() {}
