// Adversarial round three (ui-tests/README.md): `?` and `let .. else` on save outputs. `?` on an
// `Option<Saved<Tensor>>` gives the `Saved<Tensor>`; the fallible tensor
// methods (`f_*`) are not methods of it either. Fix: `needs`
// (ui-tests/pass/fixes_more.rs, `question_mark`).
use remat::{checkpoint, remat};
use tch::{TchError, Tensor};

fn maybe_mask(x: &Tensor, on: bool) -> Option<Tensor> {
    on.then(|| x.gt(0.0).to_kind(tch::Kind::Float))
}

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn question_mark_on_an_option(x: &Tensor, on: bool) -> Tensor {
    remat! { let mask = save mask: maybe_mask(x, on); }
    let masked = (|| Some(x * mask?))();
    masked.unwrap_or_else(|| x * 1)
}

#[checkpoint]
fn question_mark_on_a_result(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let y = (|| -> Result<Tensor, TchError> { a.f_exp()?.f_mul(x) })();
    y.unwrap()
}

#[checkpoint]
fn let_else(x: &Tensor, on: bool) -> Tensor {
    remat! { let mask = save mask: maybe_mask(x, on); }
    let Some(mask) = mask else {
        return x * 1;
    };
    x * mask.relu()
}

fn main() {}
