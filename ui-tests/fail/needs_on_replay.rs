// `needs` asks the runtime on the forward; during recomputation it does
// nothing (issue 19): a `needs` inside `if is_recomputing() { .. }` keeps
// nothing, so the read after it reads a placeholder.
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
