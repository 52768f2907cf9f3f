// A `remat!` that only a macro's expansion produces, from a `macro_rules!`
// defined outside the checkpoint function. The old check could not see it
// and refused it (its rule X15); rustc expands it like any macro, and
// type-checks what it binds: the `save` output `attention_block!` binds is
// a `Saved<Tensor>`, marked before it is read.
use remat::{checkpoint, remat}; // the macros below name `remat!`, which resolves where they are invoked
use tch::{Kind, Tensor};

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

macro_rules! attention_block {
    ($a:ident, $x:expr) => {
        remat! { let $a = save attention: attention($x); }
    };
}

macro_rules! scaled {
    ($name:literal, $x:expr) => {
        remat!(recompute [$name]: attention($x)) * 2.0
    };
}

#[checkpoint(enabled = on, strict = true)]
fn block(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    attention_block!(a, &h);
    remat! { needs a; }
    let y = scaled!("first", &h);
    let z = scaled!("second", &a);
    y + z
}

fn main() {
    let grad = |on: bool| {
        tch::manual_seed(0);
        let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu));
        let w = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        block(&x, &w, on).sum(Kind::Float).f_backward().unwrap();
        w.grad()
    };
    assert!(
        grad(true).equal(&grad(false)),
        "the gradients must be bitwise those without the checkpoint"
    );
}
