// Adversarial round three (ui-tests/README.md): a slice method with a tensor method's name. The old
// check took `parts.split(..)` on a `Vec` of save outputs for
// `Tensor::split`, a view; it is `<[T]>::split`, whose groups hold the save
// outputs themselves, `Saved<Tensor>`s. Fix: `needs(group)` where a group
// is read (ui-tests/pass/fixes.rs, `slice_split`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn heads(x: &Tensor) -> Vec<Tensor> {
    x.chunk(4, 0)
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! { let parts = save heads: heads(x); }
    let mut out = x * 0;
    for group in parts.split(|t| t.numel() == 0) {
        out = out + Tensor::cat(group, 0).sum(tch::Kind::Float);
    }
    out
}

fn main() {}
