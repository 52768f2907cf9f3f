// Adversarial round three (ui-tests/README.md): views and copies. `reshape`, `contiguous` and
// `to_kind` may copy, and `copy` and `clone` do, so they read the data:
// they are no methods of `Saved<Tensor>`, even after a view (`view`,
// `transpose`) that is. Fix:
// `needs` before the copy (ui-tests/pass/fixes_more.rs, `copies`).
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn reshape(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    a.reshape([-1]) * 2
}

#[checkpoint]
fn contiguous_after_a_view(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    a.transpose(0, 1).contiguous()
}

#[checkpoint]
fn to_kind_after_a_view(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    a.view(&[-1]).to_kind(Kind::Double).sum(Kind::Double)
}

#[checkpoint]
fn deep_copies(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let c = a.copy();
    let d = a.clone();
    c * x + d
}

fn main() {}
