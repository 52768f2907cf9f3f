// `needs` on a value replay rebuilds anyway: a checkpoint input, or the
// output of a `recompute` region. Neither is a `Saved<..>`, so `needs`
// refuses them (the `Needs` trait's message).
use remat::{checkpoint, remat};
use tch::Tensor;

fn mlp(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        needs x;
        let m = recompute mlp: mlp(x);
        needs m;
    }
    x + m
}

fn main() {}
