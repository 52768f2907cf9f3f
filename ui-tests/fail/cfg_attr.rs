// Adversarial round three (ui-tests/README.md): `#[cfg_attr(.., cfg(..))]` on a statement, which the
// old check did not read as a `cfg`: the `let a = needs(a);` under it is
// compiled out, so `a` is still the `Saved<Tensor>` where it is read. Fix:
// a `needs` compiled in wherever the read is (ui-tests/pass/fixes.rs,
// `cfg_attr`). The same attribute on a `needs` statement of `remat!`:
// cfg_attr_needs.rs.
use remat::{checkpoint, needs, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn on_a_let(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    #[cfg_attr(all(), cfg(any()))]
    let a = needs(a);
    a.exp()
}

fn main() {}
