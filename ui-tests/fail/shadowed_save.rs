// `needs` marks a value, not a name: after `h` is bound again to another
// `save` output, `h` is that output's `Saved<Tensor>`.
use remat::{checkpoint, remat};
use tch::Tensor;

fn f(h: &Tensor) -> Tensor {
    h.tanh()
}

fn g(h: &Tensor) -> Tensor {
    h.sin()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let h = save f: f(x);
        needs h;
        let y = h.relu();
        let h = save g: g(&y);
    }
    h.relu() + y
}

fn main() {}
