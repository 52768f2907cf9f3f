// `scope NAME { .. }` labels the trace; bindings made in it stay visible.
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn mlp(h: &Tensor) -> Tensor {
    h.sin()
}

#[checkpoint(strict = true)]
fn block(x: &Tensor, index: usize) -> Tensor {
    remat! {
        scope "attention block" {
            let a = save attention: attention(x);
            needs a;
        }
        scope [format!("mlp.{index}")] {
            let m = recompute mlp: mlp(&(x + &a));
        }
    }
    m + a
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let (y, trace) = remat::diagnostics::collect_trace(|| block(&x, 3));
    assert_eq!(
        trace.to_string(),
        "remat trace\n  attention block\n    attention: save\n  mlp.3\n    mlp: recompute\n"
    );
    y.sum(Kind::Float).f_backward().unwrap();
    let g = x.grad().copy();
    let _ = x.grad().zero_();
    let a = attention(&x);
    (mlp(&(&x + &a)) + a).sum(Kind::Float).backward();
    assert!(
        g.equal(&x.grad()),
        "the gradients must be bitwise those of the plain version"
    );
}
