// Adversarial round three (ui-tests/README.md): run-time policies. The output of `region [p]` and of
// `auto` is a `Saved<Tensor>` whatever policy runs (the compiler cannot
// know it), like a `save` output. Fix: `needs`
// (ui-tests/pass/fixes_more.rs, `policies`).
use remat::{checkpoint, remat, Policy};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn run_time_policy(x: &Tensor, p: Policy) -> Tensor {
    remat! { let a = region [p] attention: attention(x); }
    a.exp() * x
}

#[checkpoint]
fn auto_policy(x: &Tensor) -> Tensor {
    remat! { let a = auto attention: attention(x); }
    x + a
}

fn main() {}
