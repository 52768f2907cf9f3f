// A helper that reads a save output on the forward only (logging), in a
// `scope`: it gets `on_forward()`'s detached alias, and nothing during
// recomputation, so the save output needs no mark (docs/dsl.md, Y6; the
// old `#[remat(unchecked)]` on such a statement is gone).
use remat::{checkpoint, remat};
use std::sync::atomic::{AtomicUsize, Ordering};
use tch::{Kind, Tensor};

static LOGGED: AtomicUsize = AtomicUsize::new(0);

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn log_norm(t: Option<Tensor>) {
    if let Some(t) = t {
        assert!(t.norm().double_value(&[]) >= 0.0);
        LOGGED.fetch_add(1, Ordering::SeqCst);
    }
}

#[checkpoint(strict = true)]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
        log_norm(attn.on_forward());
        scope extra {
            let first = attn.on_forward().map(|a| a.get(0));
            assert!(first.is_none_or(|f| f.numel() == 1));
        }
    }
    x * 2
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    (block(&x) * &x).sum(Kind::Float).f_backward().unwrap();
    assert_eq!(LOGGED.load(Ordering::SeqCst), 1);
    assert!(x.grad().allclose(&(&x * 4), 1e-6, 1e-6, false));
}
