// Adversarial round three (ui-tests/README.md): macros defined outside the body, and a nested
// `remat!` in a `remat!` block. rustc expands both, and type-checks what
// they expand to: a save output they bind or read is a `Saved<Tensor>`.
// Fix: `needs` (ui-tests/pass/fixes_more.rs, `macros`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

macro_rules! gated {
    ($h:expr, $g:expr) => {
        $h * $g.sigmoid()
    };
}

macro_rules! attention_block {
    ($a:ident, $x:expr) => {
        remat! { let $a = save attention: attention($x); }
    };
}

#[checkpoint]
fn reads_through_an_outside_macro(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    gated!(x, a)
}

#[checkpoint]
fn binds_through_an_outside_macro(x: &Tensor) -> Tensor {
    attention_block!(a, x);
    a.exp()
}

#[checkpoint]
fn nested_remat(x: &Tensor) -> Tensor {
    remat! {
        let a = save attention: attention(x);
        remat! {
            let b = save second: attention(&(x * 2));
        }
        needs a;
    }
    a * b
}

fn main() {}
