// A `save` output passed directly to a region (`x`, `&x`, a view of it)
// needs no mark: the runtime keeps what a `recompute` region receives.
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn mlp(h: &Tensor) -> Tensor {
    h.sin() * 2
}

fn mix(a: &Tensor, b: Option<&Tensor>) -> Tensor {
    match b {
        Some(b) => a * b,
        None => a.shallow_clone(),
    }
}

#[checkpoint(strict = true)]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
        let m = recompute mlp: mlp(&attn);
        let t = recompute transposed: mlp(&attn.transpose(0, 1));
        let p = save mix: mix(&m, Some(&attn));
    }
    // `p` and `t` are returned, `m` is a recompute output: no reads to mark.
    remat!(recompute add: add(&p, &t.transpose(0, 1)))
}

fn add(a: &Tensor, b: &Tensor) -> Tensor {
    a + b
}

fn plain(x: &Tensor) -> Tensor {
    let attn = attention(x);
    let m = mlp(&attn);
    let t = mlp(&attn.transpose(0, 1));
    add(&mix(&m, Some(&attn)), &t.transpose(0, 1))
}

fn main() {
    let x = Tensor::randn([3, 3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let y = block(&x);
    y.sum(Kind::Float).f_backward().unwrap();
    let g = x.grad().copy();
    let _ = x.grad().zero_();
    plain(&x).sum(Kind::Float).backward();
    assert!(
        g.equal(&x.grad()),
        "the gradients must be bitwise those of the plain version"
    );
}
