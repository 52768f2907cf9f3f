// A checkpoint closure that borrows `self`: it runs again during backward,
// after `call` returns, so it must own what it uses.
use remat::prelude::*;

struct Model {
    w: Tensor,
}

impl Model {
    fn forward(&self, x: &Tensor) -> Tensor {
        checkpoint("b").call(x, |x| x.matmul(&self.w))
    }
}

fn main() {
    let m = Model { w: Tensor::ones([2, 2], tch::kind::FLOAT_CPU) };
    let _ = m.forward(&Tensor::ones([2, 2], tch::kind::FLOAT_CPU));
}
