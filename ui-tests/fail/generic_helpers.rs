// Adversarial round three (ui-tests/README.md): trait and generic helpers. `Saved<Tensor>` is no
// `AsRef<Tensor>` nor `Borrow<Tensor>`, and a trait method taking `&Tensor`
// does not take a `&Saved<Tensor>`. Fix: `needs` at the call
// (ui-tests/pass/fixes_more.rs, `generic_helpers`).
use remat::{checkpoint, remat};
use std::borrow::Borrow;
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

fn norm<T: AsRef<Tensor>>(t: T) -> Tensor {
    t.as_ref().norm()
}

fn scaled<T: Borrow<Tensor>>(t: T, s: f64) -> Tensor {
    t.borrow() * s
}

trait Activation {
    fn apply(&self, t: &Tensor) -> Tensor;
}

struct Gelu;

impl Activation for Gelu {
    fn apply(&self, t: &Tensor) -> Tensor {
        t.gelu("none")
    }
}

#[checkpoint]
fn as_ref_helper(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    norm(&a) * x
}

#[checkpoint]
fn borrow_helper(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    scaled(a, 2.0)
}

#[checkpoint]
fn trait_method(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    Gelu.apply(&a)
}

fn main() {}
