// Adversarial round three (ui-tests/README.md): reads the old check allowed because they run on the
// forward only: under `if !is_recomputing()` (or the `else` of
// `if is_recomputing()`), under `no_grad`, or through `is_placeholder`.
// The types do not look at the condition: a save output has no tensor
// methods there either. Fix: `.on_forward()`, a detached alias on the
// forward and `None` during recomputation (docs/dsl.md, Y6;
// ui-tests/pass/is_recomputing.rs and on_forward.rs).
use remat::{autograd::is_placeholder, checkpoint, is_recomputing, remat};
use tch::{Kind, Tensor};

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn under_not_recomputing(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    if !is_recomputing() {
        let mean = tch::no_grad(|| a.mean(Kind::Float)).double_value(&[]);
        assert!(mean.is_finite());
    }
    x * 2
}

#[checkpoint]
fn in_the_else_of_recomputing(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let scale = if is_recomputing() {
        1.0
    } else {
        a.max().double_value(&[])
    };
    x * scale
}

#[checkpoint]
fn asks_whether_it_is_a_placeholder(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    assert!(!is_recomputing() || is_placeholder(&a));
    x * 2
}

fn main() {}
