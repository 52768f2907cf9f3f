// A `needs` inside `if is_recomputing() { .. }` (adversarial round two): the marked
// binding lives in that block only, so `a` after it is still the
// `Saved<Tensor>`. (The expression form there compiles, and fails at run
// time naming the save: ui-tests/pass/replay_only_needs.rs.)
use remat::{checkpoint, is_recomputing, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    if is_recomputing() {
        remat! { needs a; }
    }
    a.exp()
}

fn main() {}
