// Code that runs on the forward only reads a save output through
// `on_forward()`: a detached alias on the forward, `None` during
// recomputation (docs/dsl.md, Y6), so it needs no mark. `is_recomputing()`
// still tells the two phases apart.
use remat::{checkpoint, is_recomputing, remat};
use std::sync::atomic::{AtomicUsize, Ordering};
use tch::{Kind, Tensor};

static LOGGED: AtomicUsize = AtomicUsize::new(0);
static REPLAYED: AtomicUsize = AtomicUsize::new(0);

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint(strict = true)]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
    }
    // Detached: forward-only code records no autograd saves that replay
    // would not make again.
    if let Some(attn) = attn.on_forward() {
        assert!(!attn.requires_grad());
        let mean = attn.mean(Kind::Float).double_value(&[]);
        assert!(mean.is_finite());
        LOGGED.fetch_add(1, Ordering::SeqCst);
    }
    if is_recomputing() {
        assert!(attn.on_forward().is_none());
        REPLAYED.fetch_add(1, Ordering::SeqCst);
    } else {
        assert!(attn.on_forward().unwrap().abs().max().double_value(&[]) <= 1.0);
    }
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
