//! The scenario of docs/architecture.md's walk-through, as a program: one
//! checkpoint with a `Save` region and a `Recompute` region reading its
//! output, forward and backward, every option at its default.
//!
//! Run plainly (`cargo test --test walkthrough`) it checks that the
//! scenario computes the un-checkpointed gradients bitwise and recomputes
//! what the walk-through says. `cargo xtask walkthrough` runs the same
//! binary under callgrind and compares the files whose code ran with the
//! walk-through's list (xtask/src/walkthrough.rs); `cargo xtask test` runs
//! that check.

use remat::{checkpoint, region, Policy};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use tch::{Kind, Tensor};

fn inputs() -> (Tensor, Tensor, Tensor) {
    let x = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25, 1.5, -0.75])
        .view([2, 3])
        .set_requires_grad(true);
    let w = Tensor::from_slice(&[0.1f32, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, -0.8, 0.9]).view([3, 3]);
    let w2 = Tensor::from_slice(&[-0.2f32, 0.3, 0.1, 0.6, -0.4, 0.8, 0.5, 0.2, -0.7]).view([3, 3]);
    (x, w, w2)
}

/// The walk-through's example, with counters of the region bodies' runs.
fn scenario(runs: &[Arc<AtomicUsize>; 2]) -> Tensor {
    let (x, w, w2) = inputs();
    let [attn, mlp] = runs.clone();
    let y = checkpoint("block").call(&x, move |x| {
        let attn = attn.clone();
        let mlp = mlp.clone();
        let (w, w2) = (w.shallow_clone(), w2.shallow_clone());
        let a = region("attn", Policy::Save).call(&x, move |x| {
            attn.fetch_add(1, SeqCst);
            x.matmul(&w).softmax(-1, Kind::Float)
        });
        region("mlp", Policy::Recompute).call(&a, move |a| {
            mlp.fetch_add(1, SeqCst);
            a.matmul(&w2).relu()
        })
    });
    y.sum(Kind::Float).backward();
    x.grad()
}

fn plain() -> Tensor {
    let (x, w, w2) = inputs();
    let y = x.matmul(&w).softmax(-1, Kind::Float).matmul(&w2).relu();
    y.sum(Kind::Float).backward();
    x.grad()
}

#[test]
fn the_walkthrough_scenario_recomputes_the_mlp_only_and_keeps_the_gradients() {
    let runs = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let grad = scenario(&runs);
    assert!(
        grad.equal(&plain()),
        "{grad} differs from the plain model's"
    );
    // "attn" ran once (skipped on replay, rule P1); "mlp" twice (C6).
    assert_eq!(runs[0].load(SeqCst), 1);
    assert_eq!(runs[1].load(SeqCst), 2);
}
