// tch's style, `x.apply(&self.ff)`, as a region: the region's inputs are the
// call's arguments, so the module would be the input, and it is none. The
// `RegionArg` message says to write `self.ff.forward(&x)`.
use remat::nn;
use remat::prelude::*;

#[derive(Capture)]
struct Block {
    ff: nn::Linear,
}

impl Block {
    #[checkpoint]
    fn forward(&self, x: &Tensor) -> Tensor {
        remat! {
            let y = save ff: x.apply(&self.ff);
            needs y;
        }
        y.relu()
    }
}

fn main() {}
