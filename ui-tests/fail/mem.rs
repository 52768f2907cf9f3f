// Adversarial round three (ui-tests/README.md): `mem::take`, `mem::replace` and `mem::swap`. A
// tensor's place cannot take a `Saved<Tensor>`, and what comes out of a
// save output's place is a `Saved<Tensor>`. Fix: `needs` first
// (ui-tests/pass/fixes_more.rs, `mem`).
use remat::{checkpoint, remat};
use std::mem;
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn replace(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let mut h = x * 2;
    let old = mem::replace(&mut h, a);
    h * old
}

#[checkpoint]
fn swap(x: &Tensor) -> Tensor {
    remat! { let mut a = save attention: attention(x); }
    let mut h = x * 2;
    mem::swap(&mut h, &mut a);
    h.exp()
}

#[checkpoint]
fn take(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let mut slot = Some(a);
    let h = mem::take(&mut slot).unwrap();
    h.exp()
}

fn main() {}
