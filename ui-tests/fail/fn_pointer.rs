// Adversarial round three (ui-tests/README.md): a call through a `const` or `static` function
// pointer, whose upper-case name the old check took for a tuple struct's
// constructor. The pointer takes `&Tensor`, and a save output is a
// `&Saved<Tensor>`. Fix: `needs(&a)` at the call, or make the call a
// region (ui-tests/pass/fixes.rs, `fn_pointer`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

fn gelu(x: &Tensor) -> Tensor {
    x.gelu("none")
}

const ACT: fn(&Tensor) -> Tensor = gelu;
static NORM: fn(&Tensor) -> Tensor = gelu;

#[checkpoint]
fn through_const(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    ACT(&a) + x
}

#[checkpoint]
fn through_static(x: &Tensor) -> Tensor {
    let a = remat!(save attention: attention(x));
    let h = NORM(&a);
    h * x
}

fn main() {}
