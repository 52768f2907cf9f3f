// A layer built from a closure that borrows `self`: checkpoints run the layer
// again during backward, so the closure must own what it uses.
use remat::nn::{self, Module};
use remat::prelude::*;

struct Model {
    w: Tensor,
}

impl Model {
    fn head(&self) -> nn::Func {
        nn::func(|x| x.matmul(&self.w))
    }

    fn stack(&self) -> nn::SequentialT {
        nn::seq_t().add_fn_t(|x, train| x.matmul(&self.w).dropout(0.1, train))
    }
}

fn main() {
    let m = Model { w: Tensor::ones([2, 2], tch::kind::FLOAT_CPU) };
    let _ = m.head().forward(&Tensor::ones([2, 2], tch::kind::FLOAT_CPU));
    let _ = m.stack();
}
