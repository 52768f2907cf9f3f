// Adversarial round three (ui-tests/README.md): `needs` statements that cannot rebind what they
// name: a tuple field and an index are no local names (the statement is
// `let NAME = needs(NAME);`). Fix: the expression form where the value is
// read, `needs(&p.0)` (ui-tests/pass/fixes_more.rs, `outputs`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn pair(x: &Tensor) -> (Tensor, Tensor) {
    (x.tanh(), x.sin())
}

fn heads(x: &Tensor) -> Vec<Tensor> {
    x.chunk(2, 0)
}

#[checkpoint]
fn a_field(x: &Tensor) -> Tensor {
    remat! {
        let p = save pair: pair(x);
        needs p.0;
    }
    x * 2
}

#[checkpoint]
fn an_index(x: &Tensor) -> Tensor {
    remat! {
        let parts = save heads: heads(x);
        needs parts[0];
    }
    x * 2
}

fn main() {}
