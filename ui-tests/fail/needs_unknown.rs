// `needs` names a variable that does not exist: rustc's error, with its
// suggestion; `attn` stays a `Saved<Tensor>`.
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
        needs atn;
    }
    x + attn
}

fn main() {}
