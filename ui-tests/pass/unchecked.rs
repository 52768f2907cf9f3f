// `#[remat(unchecked)]` skips the check for one statement, for a read the
// user knows is safe (here: replay never reaches it).
use remat::{checkpoint, is_recomputing, remat};
use tch::{Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn log_norm(t: &Tensor, on: bool) {
    if on {
        // No grad: the forward saves nothing here that replay would not.
        assert!(tch::no_grad(|| t.norm()).double_value(&[]) >= 0.0);
    }
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    let forward = !is_recomputing();
    remat! {
        let attn = save attention: attention(x);
        #[remat(unchecked)]
        log_norm(&attn, forward);
        #[remat(unchecked)]
        scope extra {
            let first = if forward { tch::no_grad(|| attn.get(0)) } else { x.get(0) };
            assert!(first.numel() == 1);
        }
    }
    x * 2
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    (block(&x) * &x).sum(Kind::Float).f_backward().unwrap();
    assert!(x.grad().allclose(&(&x * 4), 1e-6, 1e-6, false));
}
