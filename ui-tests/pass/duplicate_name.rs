// Two regions with the same static name in one checkpoint. The macros no
// longer compare names (the old check did, docs/dsl.md's former rule X8):
// the runtime refuses the second one on the forward (docs/semantics.md,
// rule R2, error E3), naming it.
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn mlp(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let a = recompute mlp: mlp(x);
        let b = recompute mlp: mlp(&a);
    }
    b
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let err = std::panic::catch_unwind(|| block(&x)).unwrap_err();
    let message = err.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("region `block::mlp`: the name is used twice in one forward"),
        "{message}"
    );
}
