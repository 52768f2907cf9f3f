// Adversarial round three (ui-tests/README.md): save outputs in user structs, `Rc`, `RefCell` and
// `Box`, read through them: each derefs to the `Saved<Tensor>` it holds,
// which has no tensor methods, no operators, no comparison and no
// `Display`. Fix: `needs(&holder.field)` (ui-tests/pass/fixes_more.rs,
// `wrappers`).
use remat::{checkpoint, remat, Saved};
use std::cell::RefCell;
use std::rc::Rc;
use tch::Tensor;

fn pair(x: &Tensor) -> (Tensor, Tensor) {
    (x.tanh(), x.sin())
}

struct Cache {
    attn: Saved<Tensor>,
}

#[checkpoint]
fn struct_field(x: &Tensor) -> Tensor {
    remat! { let (a, _b) = save pair: pair(x); }
    let cache = Cache { attn: a };
    cache.attn.exp()
}

#[checkpoint]
fn rc_refcell_box(x: &Tensor) -> Tensor {
    remat! { let (a, b) = save pair: pair(x); }
    let shared = Rc::new(RefCell::new(a));
    let boxed = Box::new(b);
    shared.borrow().sin() + boxed.cos()
}

#[checkpoint]
fn operators(x: &Tensor) -> Tensor {
    remat! { let (a, b) = save pair: pair(x); }
    let same = a == b;
    println!("{a} {same}");
    -a
}

fn main() {}
