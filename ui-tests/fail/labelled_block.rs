// A `break 'b` out of a labelled block carries a save output to the code
// after the block (adversarial round two): `h` is a `Tensor`, `a` a `Saved<Tensor>`.
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    let mut h = x * 1.0;
    'b: {
        remat! { let a = save attention: attention(x); }
        h = a;
        break 'b;
    }
    (&h + x).tanh()
}

fn main() {}
