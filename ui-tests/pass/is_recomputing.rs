// Code guarded by `if !is_recomputing()` (or the `else` of
// `if is_recomputing()`) runs only on the forward: it may read anything.
use remat::{checkpoint, is_recomputing, remat};
use std::sync::atomic::{AtomicUsize, Ordering};
use tch::{Kind, Tensor};

static LOGGED: AtomicUsize = AtomicUsize::new(0);
static REPLAYED: AtomicUsize = AtomicUsize::new(0);

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
    }
    // Forward-only code must not record autograd saves that replay would
    // not make again: it runs without grad.
    if !is_recomputing() {
        let mean = tch::no_grad(|| attn.mean(Kind::Float)).double_value(&[]);
        assert!(mean.is_finite());
        LOGGED.fetch_add(1, Ordering::SeqCst);
    }
    if is_recomputing() {
        REPLAYED.fetch_add(1, Ordering::SeqCst);
    } else {
        assert!(tch::no_grad(|| attn.abs().max()).double_value(&[]) <= 1.0);
    }
    // A save after the `if`s: recomputation (which stops after the last
    // save, docs/semantics.md, rule C17) reaches them.
    x * x + attn.size()[0]
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let y = block(&x) * &x;
    y.sum(Kind::Float).f_backward().unwrap();
    assert_eq!(LOGGED.load(Ordering::SeqCst), 1);
    assert_eq!(REPLAYED.load(Ordering::SeqCst), 1);
    // d/dx ((x² + 4) x) = 3x² + 4
    assert!(x.grad().allclose(&(&x * &x * 3 + 4), 1e-5, 1e-5, false));
}
