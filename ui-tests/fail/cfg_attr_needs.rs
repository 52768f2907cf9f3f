// Adversarial round three (ui-tests/README.md): `#[cfg_attr(.., cfg(..))]` on a `needs` statement of
// `remat!`. The statement is `let a = needs(a);`, which keeps the
// attribute: compiled out, `a` stays the `Saved<Tensor>`, and the read
// after it is a type error.
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
