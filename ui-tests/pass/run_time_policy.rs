// One body for every policy: `region [EXPR]` and `#[checkpoint(enabled =
// ..., strict = ...)]` take run-time values; every combination gives the
// plain version's gradients.
use remat::{checkpoint, remat, Capture, Policy};
use tch::{Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn mlp(h: &Tensor) -> Tensor {
    h.sigmoid() * 3
}

#[derive(Capture)]
struct Block {
    attention: Policy,
    mlp: Policy,
    checkpointing: bool,
}

impl Block {
    #[checkpoint(enabled = self.checkpointing, strict = true)]
    fn forward(&self, x: &Tensor) -> Tensor {
        remat! {
            let a = region [self.attention] attention: attention(x);
            needs a;
            let h = x + &a;
            let m = region [self.mlp] mlp: mlp(&h);
            needs m;
        }
        h * m
    }
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let plain = {
        let h = &x + x.tanh();
        &h * (h.sigmoid() * 3)
    };
    plain.sum(Kind::Float).backward();
    let expected = x.grad().copy();
    for checkpointing in [false, true] {
        for attention in [Policy::Save, Policy::Recompute] {
            for mlp in [Policy::Save, Policy::Recompute] {
                let _ = x.grad().zero_();
                let block = Block { attention, mlp, checkpointing };
                block.forward(&x).sum(Kind::Float).f_backward().unwrap();
                assert!(x.grad().equal(&expected), "{checkpointing} {attention:?} {mlp:?}");
            }
        }
    }
}
