// One block body for every policy, as model code writes it:
// `region [p]` over each `Policy` (`Save`, `Recompute`, `Auto`, `Offload`)
// for each of two regions, and `auto` regions and an `auto` checkpoint
// under policy tables that save, recompute, offload or switch the
// checkpoint off. The outputs are `Saved<Tensor>`s whatever runs, marked
// where bare code reads them. Under strict recomputation each gives
// bitwise the gradients without the checkpoint.
use remat::policies::{PolicyRule, PolicyTable};
use remat::{checkpoint, remat, Capture, Policy};
use tch::{Device, Kind, Tensor};

#[derive(Capture)]
struct Block {
    attention: Tensor,
    mlp: Tensor,
    policies: [Policy; 2],
    on: bool,
}

fn linear(h: &Tensor, w: &Tensor) -> Tensor {
    h.matmul(w).tanh()
}

impl Block {
    #[checkpoint(enabled = self.on, strict = true)]
    fn forward(&self, x: &Tensor) -> Tensor {
        remat! {
            let a = region [self.policies[0]] attention: linear(x, &self.attention);
            needs a;
            let h = x + &a;
            let m = region [self.policies[1]] mlp: linear(&h, &self.mlp);
            needs m;
        }
        h * m
    }

    #[checkpoint(auto, strict = true)]
    fn forward_auto(&self, x: &Tensor) -> Tensor {
        remat! {
            let a = auto attention: linear(x, &self.attention);
            needs a;
            let h = x + &a;
            let m = auto mlp: linear(&h, &self.mlp);
            needs m;
        }
        h * m
    }
}

fn grads(
    policies: [Policy; 2],
    on: bool,
    forward: impl Fn(&Block, &Tensor) -> Tensor,
) -> Vec<Tensor> {
    tch::manual_seed(0);
    let opts = (Kind::Float, Device::Cpu);
    let weight = || (Tensor::randn([4, 4], opts) * 0.5).set_requires_grad(true);
    let block = Block {
        attention: weight(),
        mlp: weight(),
        policies,
        on,
    };
    let x = Tensor::randn([3, 4], opts).set_requires_grad(true);
    forward(&block, &x).sum(Kind::Float).f_backward().unwrap();
    vec![x.grad(), block.attention.grad(), block.mlp.grad()]
}

fn assert_same(name: &str, on: Vec<Tensor>, off: &[Tensor]) {
    for (g, expected) in on.iter().zip(off) {
        assert!(
            g.equal(expected),
            "{name}: the gradients must be bitwise those without the checkpoint"
        );
    }
}

fn main() {
    let every = [
        Policy::Save,
        Policy::Recompute,
        Policy::Auto,
        Policy::OFFLOAD,
    ];
    let plain = grads(every[..2].try_into().unwrap(), false, Block::forward);
    for attention in every {
        for mlp in every {
            let on = grads([attention, mlp], true, Block::forward);
            assert_same(&format!("{attention:?} {mlp:?}"), on, &plain);
        }
    }
    for policy in [Policy::Save, Policy::Recompute, Policy::OFFLOAD] {
        let table = PolicyTable::new()
            .rule(PolicyRule::Region {
                pattern: "attention".into(),
                policy,
            })
            .rule(PolicyRule::Region {
                pattern: "mlp".into(),
                policy: Policy::Save,
            });
        let on = grads(every[..2].try_into().unwrap(), true, |b, x| {
            table.scope(|| b.forward_auto(x)).unwrap()
        });
        assert_same(&format!("auto, {policy:?}"), on, &plain);
    }
    let off = PolicyTable::new().rule(PolicyRule::Checkpoint {
        pattern: "forward_auto".into(),
        enabled: false,
    });
    let on = grads(every[..2].try_into().unwrap(), true, |b, x| {
        off.scope(|| b.forward_auto(x)).unwrap()
    });
    assert_same("auto, switched off", on, &plain);
    // Without a plan: `auto` regions recompute, the checkpoint is on.
    let on = grads(every[..2].try_into().unwrap(), true, Block::forward_auto);
    assert_same("auto, no plan", on, &plain);
}
