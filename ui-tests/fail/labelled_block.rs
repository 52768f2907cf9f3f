// A `break 'b` out of a labelled block carries its path's state to the
// code after the block (issue 19): `h` holds the `save` output there.
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
