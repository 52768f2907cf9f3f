// Adversarial round three (ui-tests/README.md): `let .. else` whose initializer runs a closure with a
// side effect, which stores a save output where bare code reads it later.
// The store holds the save output's type, `Option<Saved<Tensor>>`, or
// refuses it where it holds tensors. Fix: `needs` what is read
// (ui-tests/pass/fixes.rs, `let_else`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn stored_by_the_initializer(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let mut kept = None;
    let Some(scale) = (|| {
        kept = Some(a.shallow_clone());
        x.size().first().copied()
    })() else {
        return x * 1;
    };
    kept.unwrap().exp() * scale
}

#[checkpoint]
fn stored_in_a_tensor(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let mut kept: Option<Tensor> = None;
    let Some(scale) = (|| {
        kept = Some(a.shallow_clone());
        x.size().first().copied()
    })() else {
        return x * 1;
    };
    kept.unwrap() * scale
}

fn main() {}
