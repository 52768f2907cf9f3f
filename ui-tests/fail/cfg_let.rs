// A `let` under `#[cfg]` may be compiled out, and then shadows nothing
// (issue 19): the check takes each cfg'd statement as an alternative, so
// `attn` may be the `save` output here whichever cfg holds.
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        #[cfg(debug_assertions)]
        let attn = save attention: attention(x);
        #[cfg(not(debug_assertions))]
        let attn = recompute attention: attention(x);
    }
    attn.exp()
}

fn main() {}
