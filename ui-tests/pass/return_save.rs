// Returning a `save` output (alone, in a tuple, from a branch) needs no
// mark: on replay the checkpoint's return value is discarded.
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint(strict = true)]
fn alone(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
    }
    attn
}

#[checkpoint(strict = true)]
fn pair(x: &Tensor, early: bool) -> (Tensor, Tensor) {
    remat! {
        let a = save a: attention(x);
        let b = save b: attention(&a);
    }
    if early {
        return (a, b);
    }
    (b, a)
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let y = alone(&x);
    let (a, b) = pair(&x, true);
    (y + a + b).sum(Kind::Float).f_backward().unwrap();
    let g = x.grad().copy();
    let _ = x.grad().zero_();
    let t = x.tanh();
    (&t + &t + t.tanh()).sum(Kind::Float).backward();
    // Not bitwise: `x` gets gradient along several paths, and the plain
    // version (which shares `t`) adds them in another order.
    assert!(g.allclose(&x.grad(), 1e-6, 1e-6, false));
}
