// `needs` marks a value for bare code: the value, with every view of it,
// earlier and later ones alike, from that statement on.
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn project(h: &Tensor) -> Tensor {
    h.repeat([2])
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
        let qk = save project: project(x);
        let q = qk.narrow(0, 0, 4);
        let k = qk.narrow(0, 4, 4);
        needs attn, k;                    // marks `qk` and so `q` too
        let y = x + &attn;
    }
    y * q + k
}

fn plain(x: &Tensor) -> Tensor {
    let qk = project(x);
    (x + attention(x)) * qk.narrow(0, 0, 4) + qk.narrow(0, 4, 4)
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    block(&x).sum(Kind::Float).f_backward().unwrap();
    let g = x.grad().copy();
    let _ = x.grad().zero_();
    plain(&x).sum(Kind::Float).backward();
    // Not bitwise: `x` gets gradient along three paths (attention, the
    // residual add, the projection), and the checkpoint's nodes change the
    // order autograd adds them in, which moves the last bit.
    assert!(g.allclose(&x.grad(), 1e-6, 1e-6, false));
}
