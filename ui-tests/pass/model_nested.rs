// Nested checkpoints that return their save outputs, as model code writes
// them: a block's `#[checkpoint]` forward calls a
// `#[checkpoint]` attention that returns two save outputs (the caller
// receives tensors, docs/dsl.md Y4, and the runtime asks the outer
// checkpoint to keep them, docs/semantics.md K8), and a runtime-API
// checkpoint whose closure returns a typed region's save output
// (`call_saved`); a save output of the block, marked, is an input of a
// third. With the block's checkpoint and the nested ones each on or off
// (a nested one off runs its body as the outer one's code, and its
// returned save outputs are asked of the outer one), under strict
// recomputation, it gives bitwise the gradients without any checkpoint.
use remat::{checkpoint, region, remat, Capture, Policy};
use tch::{Device, Kind, Tensor};

#[derive(Capture)]
struct Block {
    attention: Tensor,
    gate: Tensor,
    up: Tensor,
    down: Tensor,
    on: bool,
    inner_on: bool,
}

fn linear(h: &Tensor, w: &Tensor) -> Tensor {
    h.matmul(w)
}

impl Block {
    #[checkpoint(enabled = self.inner_on, strict = true)]
    fn attention(&self, h: &Tensor) -> (Tensor, Tensor) {
        remat! {
            let a = save attention: linear(h, &self.attention);
            let g = save gate: linear(h, &self.gate);
        }
        (a, g)
    }

    #[checkpoint(enabled = self.on, strict = true)]
    fn forward(&self, x: &Tensor) -> Tensor {
        let (a, g) = self.attention(x);
        let h = x + a.tanh() * g.sigmoid();
        let up = self.up.shallow_clone();
        let m = checkpoint("mlp")
            .enabled(self.inner_on)
            .strict_recompute(true)
            .call(&h, move |h| {
                region("up", Policy::Save).call_saved(&h, |h| linear(h, &up).gelu("none"))
            });
        remat! {
            let d = save down: linear(&m, &self.down);
            needs d;
        }
        let down = d.shallow_clone();
        let squashed = checkpoint("squash")
            .enabled(self.inner_on)
            .strict_recompute(true)
            .call(&down, |d| d.tanh());
        h + squashed
    }
}

fn grads(on: bool, inner_on: bool) -> Vec<Tensor> {
    tch::manual_seed(0);
    let opts = (Kind::Float, Device::Cpu);
    let c = 6;
    let weight = || (Tensor::randn([c, c], opts) * 0.3).set_requires_grad(true);
    let block = Block {
        attention: weight(),
        gate: weight(),
        up: weight(),
        down: weight(),
        on,
        inner_on,
    };
    let x = Tensor::randn([3, c], opts).set_requires_grad(true);
    block.forward(&x).sum(Kind::Float).f_backward().unwrap();
    [&x, &block.attention, &block.gate, &block.up, &block.down]
        .iter()
        .map(|t| t.grad())
        .collect()
}

fn main() {
    let off = grads(false, false);
    for (on, inner_on) in [(true, true), (true, false), (false, true)] {
        for (g, expected) in grads(on, inner_on).iter().zip(&off) {
            assert!(
                g.equal(expected),
                "{on} {inner_on}: the gradients must be bitwise those without the checkpoints"
            );
        }
    }
}
