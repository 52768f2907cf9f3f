// A `#[checkpoint(auto)]` block that returns its save output, called from
// another checkpoint, with the active plan switching the block's
// checkpoint on or off. Off, the block's body runs as the outer
// checkpoint's code (its `save` region is the outer one's), so the outer
// checkpoint must keep the returned save output (docs/semantics.md, K8).
// Expected: bitwise the gradients without any checkpoint.
use remat::policies::{PolicyRule, PolicyTable};
use remat::{checkpoint, remat};
use tch::{Device, Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint(auto, strict = true)]
fn block(h: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(h); }
    a
}

#[checkpoint(enabled = on, strict = true)]
fn outer(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    let a = block(&h);
    a.exp() * &h
}

fn grad(table: &PolicyTable, on: bool) -> Tensor {
    tch::manual_seed(0);
    let x = Tensor::randn([4, 4], (Kind::Float, Device::Cpu));
    let w = Tensor::randn([4, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    // Active through backward too: recomputation decides as the forward did.
    let active = table.activate().unwrap();
    outer(&x, &w, on).sum(Kind::Float).f_backward().unwrap();
    active.finish().unwrap();
    w.grad()
}

// The same block called under `no_grad` inside another checkpoint: its
// checkpoint runs as plain code too (docs/semantics.md, rule C4), and its
// value is bare code of the outer checkpoint.
#[checkpoint(strict = true)]
fn outer_no_grad(x: &Tensor, w: &Tensor) -> Tensor {
    let h = x * w;
    let a = tch::no_grad(|| block(&h));
    a.exp() * &h
}

fn no_grad_case() {
    tch::manual_seed(0);
    let x = Tensor::randn([4, 4], (Kind::Float, Device::Cpu));
    let w = Tensor::randn([4, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    outer_no_grad(&x, &w).sum(Kind::Float).f_backward().unwrap();
    let g = w.grad();
    let _ = w.grad().zero_();
    let h = &x * &w;
    let a = tch::no_grad(|| h.tanh());
    (a.exp() * &h).sum(Kind::Float).backward();
    assert!(g.equal(&w.grad()));
}

fn main() {
    no_grad_case();
    let block_off = PolicyTable::new().rule(PolicyRule::Checkpoint {
        pattern: "block".into(),
        enabled: false,
    });
    let plain = grad(&block_off, false);
    for table in [PolicyTable::new(), block_off] {
        assert!(grad(&table, true).equal(&plain));
    }
}
