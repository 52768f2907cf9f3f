// A view of a `save` output is a `save` output too: `narrow` and
// `transpose` of a `Saved<Tensor>` give a `Saved<Tensor>`.
use remat::{checkpoint, remat};
use tch::Tensor;

fn project(h: &Tensor) -> Tensor {
    h.repeat([1, 3])
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let qkv = save project: project(x);
        let q = qkv.narrow(-1, 0, 4).transpose(0, 1);
    }
    q.relu()
}

fn main() {}
