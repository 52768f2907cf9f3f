// Adversarial round three (ui-tests/README.md): `Option::get_or_insert_with` and closures like it,
// whose result flows into the receiver (`HashMap::entry(..).or_insert_with`,
// `Option::unwrap_or_else`, `Option::get_or_insert`). What flows in is a
// `Saved<Tensor>`: refused where the receiver holds tensors, and unreadable
// where it holds save outputs. Fix: `needs` inside the closure, or of what
// comes out (ui-tests/pass/fixes.rs, `closure_into_receiver`).
use remat::{checkpoint, remat};
use std::collections::HashMap;
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn get_or_insert_with(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let mut cache: Option<Tensor> = None;
    let h = cache.get_or_insert_with(|| a.shallow_clone());
    h.exp()
}

#[checkpoint]
fn get_or_insert_with_saved(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let mut cache = None;
    let h = cache.get_or_insert_with(|| a.shallow_clone());
    h.exp()
}

#[checkpoint]
fn entry_or_insert_with(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let mut cache: HashMap<&str, Tensor> = HashMap::new();
    let h = cache.entry("attn").or_insert_with(|| a.shallow_clone());
    h.exp()
}

#[checkpoint]
fn unwrap_or_else(x: &Tensor, given: Option<Tensor>) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let h = given.unwrap_or_else(|| a.shallow_clone());
    h.exp()
}

fn main() {}
