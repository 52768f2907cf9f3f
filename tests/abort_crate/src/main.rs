//! Checkpointed backwards in a build with `panic = "abort"`, every switch
//! asking for early stop: a stop would unwind through the closure, which
//! aborts such a build, so remat never stops there (docs/semantics.md, rule
//! C18) and each backward completes with the gradient of the model without
//! checkpoints. Exits 0 and prints `abort_crate: ok`, or dies.

use remat::autograd::backward_with;
use remat::Checkpoint;
use remat::{checkpoint, recompute_needs_tensor, region, Policy};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use tch::{Kind, Tensor};

/// The closure: `tanh` saves its output (the last save), a `Save` region
/// keeps its own, and a tail of ops that save nothing counts its runs.
fn body(x: &Tensor, w: &Tensor, tails: &AtomicUsize) -> Tensor {
    let h = x.matmul(w);
    let h = region("square", Policy::Save).call(&h, |h| h * h);
    recompute_needs_tensor(&h); // read by the bare code below on replay
    let h = h.tanh();
    tails.fetch_add(1, SeqCst);
    (h * 2.0 + 1.0).neg()
}

fn main() {
    assert!(
        cfg!(panic = "abort"),
        "this crate is built with panic = \"abort\""
    );
    Checkpoint::set_default_early_stop(true);
    assert!(
        !Checkpoint::default_early_stop(),
        "a panic = \"abort\" build never stops a recomputation early"
    );
    let x = Tensor::from_slice(&[0.3f32, -1.2, 0.7, 2.0, 0.1, -0.4]).view([3, 2]);
    let w = Tensor::from_slice(&[0.5f32, -0.25, 0.75, 1.0])
        .view([2, 2])
        .set_requires_grad(true);
    let w0 = w.detach().set_requires_grad(true);
    body(&x, &w0, &AtomicUsize::new(0))
        .sum(Kind::Float)
        .backward();
    for asked in [None, Some(true)] {
        let tails = Arc::new(AtomicUsize::new(0));
        let (t, wc) = (tails.clone(), w.shallow_clone());
        let mut ckpt = checkpoint("abort");
        if let Some(on) = asked {
            ckpt = ckpt.early_stop(on);
        }
        let y = ckpt.call(&x, move |x| body(&x, &wc, &t));
        backward_with(&y.sum(Kind::Float), false).expect("the backward completes");
        // The tail ran on the forward and again on the replay: no stop.
        assert_eq!(
            tails.load(SeqCst),
            2,
            "early stop {asked:?}: the tail's runs"
        );
        assert!(
            w.grad().equal(&w0.grad()),
            "early stop {asked:?}: the gradient differs from the model without checkpoints"
        );
        let _ = w.grad().zero_();
    }
    println!("abort_crate: ok");
}
