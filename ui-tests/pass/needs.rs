// `needs` marks a save output for bare code and hands it over readable:
// after `needs attn, q, k;` the three names are tensors. Each name is
// marked on its own (a view of a save output is a `Saved<Tensor>` of its
// own), while the runtime keeps the whole output a marked view lives in
// (docs/semantics.md, rule K6). The expression form `needs(&x)` marks where
// the value is read.
use remat::{checkpoint, needs, remat};
use tch::{Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn project(h: &Tensor) -> Tensor {
    h.repeat([2])
}

#[checkpoint(strict = true)]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
        let qk = save project: project(x);
        let q = qk.narrow(0, 0, 4);
        let k = qk.narrow(0, 4, 4);
        needs attn, q, k;
        let y = x + &attn;
    }
    y * q + k
}

/// The expression form, at each read.
#[checkpoint(strict = true)]
fn expression_form(x: &Tensor) -> Tensor {
    let attn = remat!(save attention: attention(x));
    let qk = remat!(save project: project(x));
    let y = x + needs(&attn);
    y * needs(qk.narrow(0, 0, 4)) + needs(&qk).narrow(0, 4, 4)
}

fn plain(x: &Tensor) -> Tensor {
    let qk = project(x);
    (x + attention(x)) * qk.narrow(0, 0, 4) + qk.narrow(0, 4, 4)
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    plain(&x).sum(Kind::Float).backward();
    let expected = x.grad().copy();
    for f in [block, expression_form] {
        let _ = x.grad().zero_();
        f(&x).sum(Kind::Float).f_backward().unwrap();
        // Not bitwise: `x` gets gradient along three paths (attention, the
        // residual add, the projection), and the checkpoint's nodes change the
        // order autograd adds them in, which moves the last bit.
        assert!(x.grad().allclose(&expected, 1e-6, 1e-6, false));
    }
}
