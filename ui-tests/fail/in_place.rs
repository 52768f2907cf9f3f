// Adversarial round three (ui-tests/README.md): in-place ops on a save output and on a view of it.
// `Saved<Tensor>` has no in-place methods and no `+=` (its views are
// `Saved<Tensor>` too). A marked save output may be changed in place only
// after it was kept, which the runtime refuses when it serves it (rule P2,
// error E12): ui-tests/pass/safe_reads.rs, `in_place_after_needs`.
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x * 2
}

#[checkpoint]
fn method(x: &Tensor) -> Tensor {
    remat! { let mut a = save attention: attention(x); }
    let _ = a.relu_();
    x * 1
}

#[checkpoint]
fn on_a_view(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let _ = a.narrow(0, 0, 1).fill_(0.0);
    x * 1
}

#[checkpoint]
fn compound_assignment(x: &Tensor) -> Tensor {
    remat! { let mut a = save attention: attention(x); }
    a += 1.0;
    x * 1
}

fn main() {}
