// Adversarial round three (ui-tests/README.md): macro hygiene. A `macro_rules!` of the body names
// `a` where `a` is the save output; a later `let a` shadows it before the
// call, but the macro's `a` is still the one in scope where the macro was
// defined: the `Saved<Tensor>`. Fix: `needs a;` before the macro's
// definition (ui-tests/pass/fixes.rs, `macro_hygiene`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    macro_rules! gate {
        ($h:expr) => {
            $h * a.sigmoid()
        };
    }
    let a = x * 2; // shadows `a` here, not inside `gate!`
    gate!(&a)
}

fn main() {}
