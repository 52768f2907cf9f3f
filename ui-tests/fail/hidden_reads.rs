// Reads of a `save` output that are not plain bare reads: through the
// receiver of a `recompute` region (captured, not an input: `Saved<Tensor>`
// has no `multiply`), and an inline `remat!(save ..)` read in place.
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
        let y = recompute scale: attn.multiply(x);
    }
    let z = remat!(save inner: attention(x)) + 1;
    y + z
}

fn main() {}
