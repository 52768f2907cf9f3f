// Bare code reads the output of a `save` region without `needs`: the
// output is a `Saved<Tensor>`, which has no arithmetic (docs/dsl.md, Y1).
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
