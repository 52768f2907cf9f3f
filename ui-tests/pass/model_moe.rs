// Mixture-of-experts routing, as model code writes it: the
// router's logits are a `save` output that routing reads (`needs`), each
// expert's tokens are gathered with `index_select`, run in a `save` region
// named after the expert, and scattered back with `index_add`; an expert
// that gets no token is skipped with `continue`. Under strict
// recomputation it gives bitwise the gradients without the checkpoint.
use remat::{checkpoint, remat, Capture};
use tch::{Device, Kind, Tensor};

#[derive(Capture)]
struct Moe {
    router: Tensor,
    /// Added to the logits: the last expert is never chosen.
    bias: Tensor,
    experts: Vec<Tensor>,
}

fn route(x: &Tensor, router: &Tensor, bias: &Tensor) -> Tensor {
    x.matmul(router) + bias
}

fn expert(tokens: &Tensor, w: &Tensor) -> Tensor {
    tokens.matmul(w).gelu("none")
}

impl Moe {
    #[checkpoint(enabled = on, strict = true)]
    fn forward(&self, x: &Tensor, on: bool) -> Tensor {
        remat! {
            let logits = save router: route(x, &self.router, &self.bias);
            needs logits; // routing reads it
        }
        let (gate, choice) = logits.softmax(-1, Kind::Float).max_dim(-1, false);
        let mut out = x.zeros_like();
        for (e, w) in self.experts.iter().enumerate() {
            let idx = choice.eq(e as i64).nonzero().squeeze_dim(1);
            if idx.numel() == 0 {
                continue;
            }
            let tokens = x.index_select(0, &idx);
            remat! {
                let y = save [format!("expert.{e}")]: expert(&tokens, w);
                needs y;
            }
            let weighted = y * gate.index_select(0, &idx).unsqueeze(1);
            out = out.index_add(0, &idx, &weighted);
        }
        out
    }
}

fn grads(on: bool) -> Vec<Tensor> {
    tch::manual_seed(0);
    let opts = (Kind::Float, Device::Cpu);
    let (tokens, c, n) = (12, 6, 4);
    let model = Moe {
        router: Tensor::randn([c, n], opts).set_requires_grad(true),
        bias: Tensor::from_slice(&[0.0f32, 0.0, 0.0, -1e4]),
        experts: (0..n)
            .map(|_| (Tensor::randn([c, c], opts) * 0.3).set_requires_grad(true))
            .collect(),
    };
    let x = Tensor::randn([tokens, c], opts).set_requires_grad(true);
    model.forward(&x, on).sum(Kind::Float).f_backward().unwrap();
    let mut grads = vec![model.router.grad()];
    grads.extend(model.experts.iter().map(|w| w.grad()));
    assert!(
        !grads[n as usize].defined(),
        "the last expert gets no token"
    );
    grads.truncate(n as usize);
    grads.push(x.grad());
    grads
}

fn main() {
    let (on, off) = (grads(true), grads(false));
    for (g, expected) in on.iter().zip(&off) {
        assert!(
            g.equal(expected),
            "the gradients must be bitwise those without the checkpoint"
        );
    }
}
