// Round 3 (issue 39): `#[cfg_attr(.., cfg(..))]` on a `needs` statement of
// `remat!`: `remat!` refuses any attribute there, so the mark cannot be
// compiled out unseen; `a` stays the `Saved<Tensor>`.
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let a = save attention: attention(x);
        #[cfg_attr(all(), cfg(any()))]
        needs a;
    }
    a * x
}

fn main() {}
