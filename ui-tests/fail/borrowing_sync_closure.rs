// A checkpoint closure that borrows only `Sync` data (here an `f64` field) is
// `Send`, so remat's bound cannot see the borrow (lifetimes are erased when
// traits are checked): the error is rustc's borrow error, which points at the
// borrow and says it must outlive `'static`. The fix is the same: `move` a
// copy in (`let scale = self.scale; move |x| x * scale`).
use remat::prelude::*;

struct Scale {
    scale: f64,
}

impl Scale {
    fn forward(&self, x: &Tensor) -> Tensor {
        checkpoint("s").call(x, |x| x * self.scale)
    }
}

fn main() {
    let s = Scale { scale: 2.0 };
    let _ = s.forward(&Tensor::ones([2], tch::kind::FLOAT_CPU));
}
