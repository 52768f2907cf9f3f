// Adversarial round three (ui-tests/README.md): writes of a save output through `&mut` references
// the old check lost track of: `iter_mut().enumerate()`, a `for_each`
// closure's parameter, a struct field holding a `&mut`, and a reference
// chosen in an `if`. Each target is a `Tensor`, and a save output is a
// `Saved<Tensor>`. Fix: `needs a;` first (ui-tests/pass/fixes.rs,
// `mut_refs`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn iter_mut_enumerate(x: &Tensor) -> Tensor {
    let mut hs: Vec<Tensor> = (0..3).map(|i| x * i).collect();
    remat! { let a = save attention: attention(x); }
    for (i, h) in hs.iter_mut().enumerate() {
        if i == 1 {
            *h = a.shallow_clone();
        }
    }
    Tensor::stack(&hs, 0).sum(tch::Kind::Float)
}

#[checkpoint]
fn for_each_parameter(x: &Tensor) -> Tensor {
    let mut hs: Vec<Tensor> = (0..3).map(|i| x * i).collect();
    remat! { let a = save attention: attention(x); }
    hs.iter_mut().for_each(|h| *h = a.shallow_clone());
    Tensor::stack(&hs, 0).sum(tch::Kind::Float)
}

struct Slot<'a> {
    target: &'a mut Tensor,
}

#[checkpoint]
fn field_holding_a_mut(x: &Tensor) -> Tensor {
    let mut h = x * 2;
    remat! { let a = save attention: attention(x); }
    let slot = Slot { target: &mut h };
    *slot.target = a;
    h.exp()
}

#[checkpoint]
fn chosen_in_an_if(x: &Tensor, left: bool) -> Tensor {
    let mut l = x * 2;
    let mut r = x * 3;
    remat! { let a = save attention: attention(x); }
    let target = if left { &mut l } else { &mut r };
    *target = a;
    l * r
}

fn main() {}
