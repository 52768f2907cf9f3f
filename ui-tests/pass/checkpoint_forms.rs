// `#[checkpoint]` on methods and free functions, with its options, every
// kind of tensor parameter, captured parameters and a derived `Capture`.
use remat::{checkpoint, remat, Capture, RngStateHook};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

#[derive(Capture)]
struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> Tensor {
        x.linear(&self.weight, self.bias.as_ref())
    }
}

#[derive(Capture)]
struct Block {
    index: usize,
    proj: Linear,
    scales: Vec<f64>,
    label: Arc<str>,
}

impl Block {
    // Out of place on purpose: tch's `*=` and `+=` are in-place ops.
    #[allow(clippy::assign_op_pattern)]
    #[checkpoint(name = [format!("layers.{}", self.index)], determinism = Metadata)]
    fn forward(&self, x: &Tensor, mask: Option<&Tensor>, extra: &[Tensor]) -> Tensor {
        assert_eq!(&*self.label, "block");
        remat! {
            let y = save proj: self.proj.forward(x);
            needs y;
        }
        let mut out = y * self.scales[0];
        if let Some(mask) = mask {
            out = out * mask;
        }
        for e in extra {
            out = out + e;
        }
        out
    }

    /// Owned `self` and owned tensor parameters.
    #[checkpoint(name = "consume", state_hooks = [RngStateHook::cpu()])]
    fn consume(self, x: Tensor, p: f64) -> Tensor {
        let h = self.proj.forward(&x);
        remat!(recompute dropout: h.dropout(p, true))
    }
}

#[checkpoint]
fn free(x: &Tensor, xs: &Vec<Tensor>, _: &str, kind: Kind) -> Tensor {
    assert_eq!(kind, Kind::Float);
    let save = 2.0; // the keywords stay ordinary names outside statements
    let needs = [x.shallow_clone()];
    remat! {
        let z = recompute scale: scale(&needs[0], save);
    }
    z + &xs[0]
}

fn scale(x: &Tensor, s: f64) -> Tensor {
    x * s
}

fn main() {
    let opts = (Kind::Float, Device::Cpu);
    let x = Tensor::randn([2, 3], opts).set_requires_grad(true);
    let block = Block {
        index: 0,
        proj: Linear {
            weight: Tensor::randn([3, 3], opts).set_requires_grad(true),
            bias: Some(Tensor::zeros([3], opts).set_requires_grad(true)),
        },
        scales: vec![0.5],
        label: Arc::from("block"),
    };
    let mask = Tensor::ones([2, 3], opts);
    let extra = vec![Tensor::ones([2, 3], opts)];
    let y = block.forward(&x, Some(&mask), &extra) + block.forward(&x, None, &[]);
    let z = free(&x, &extra, "unused", Kind::Float);
    let w = block.consume(x.shallow_clone(), 0.5);
    (y + z + w).sum(Kind::Float).f_backward().unwrap();
    assert!(x.grad().defined());
}
