// A write through a `&mut` re-borrow (adversarial round two): `r.t` is a `Tensor`, so
// storing a `Saved<Tensor>` there is a type error.
use remat::{checkpoint, remat};
use tch::Tensor;

struct S {
    t: Tensor,
}

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    let mut s = S { t: x * 1.0 };
    remat! { let a = save attention: attention(x); }
    let r = &mut s;
    r.t = a;
    (&s.t + x).tanh()
}

fn main() {}
