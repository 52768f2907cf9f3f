//! Checkpointed backwards in a build with `panic = "abort"`: early stop is
//! on by default there too, since the stop unwinds nothing
//! (docs/semantics.md, rules C17 and C18). The closure holds a
//! `std::sync::Mutex` guard across its ops, so the stop lands while it is
//! held; each backward completes with the gradient of the model without
//! checkpoints, the replay's tail computes nothing, and the mutex is never
//! poisoned. `early_stop(false)` runs the tail again. Exits 0 and prints
//! `abort_crate: ok`, or dies.

use remat::autograd::{backward_with, is_placeholder};
use remat::Checkpoint;
use remat::{checkpoint, is_recomputing, recompute_needs_tensor, region, Policy};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tch::{Kind, Tensor};

/// The closure: `tanh` saves its output (the last save), a `Save` region
/// keeps its own, and a tail of ops that save nothing counts the replays in
/// which it computed.
fn body(x: &Tensor, w: &Mutex<Tensor>, computed: &AtomicUsize) -> Tensor {
    let w = w.lock().expect("the weight's mutex is not poisoned");
    let h = x.matmul(&w);
    let h = region("square", Policy::Save).call(&h, |h| h * h);
    recompute_needs_tensor(&h); // read by the bare code below on replay
    let h = h.tanh();
    let out = (h * 2.0 + 1.0).neg();
    if is_recomputing() && !is_placeholder(&out) {
        computed.fetch_add(1, SeqCst);
    }
    out
}

fn main() {
    assert!(
        cfg!(panic = "abort"),
        "this crate is built with panic = \"abort\""
    );
    assert!(
        Checkpoint::default_early_stop(),
        "early stop is on by default, in a panic = \"abort\" build too"
    );
    let x = Tensor::from_slice(&[0.3f32, -1.2, 0.7, 2.0, 0.1, -0.4]).view([3, 2]);
    let w = Tensor::from_slice(&[0.5f32, -0.25, 0.75, 1.0])
        .view([2, 2])
        .set_requires_grad(true);
    let w0 = w.detach().set_requires_grad(true);
    body(&x, &Mutex::new(w0.shallow_clone()), &AtomicUsize::new(0))
        .sum(Kind::Float)
        .backward();
    let layer = Arc::new(Mutex::new(w.shallow_clone()));
    for (asked, tail_replays) in [(None, 0), (Some(true), 0), (Some(false), 1)] {
        let computed = Arc::new(AtomicUsize::new(0));
        let (c, l) = (computed.clone(), layer.clone());
        let mut ckpt = checkpoint("abort");
        if let Some(on) = asked {
            ckpt = ckpt.early_stop(on);
        }
        let y = ckpt.call(&x, move |x| body(&x, &l, &c));
        backward_with(&y.sum(Kind::Float), false).expect("the backward completes");
        assert_eq!(
            computed.load(SeqCst),
            tail_replays,
            "early stop {asked:?}: replays whose tail computed"
        );
        assert!(
            !layer.is_poisoned(),
            "early stop {asked:?}: the stop poisoned the mutex"
        );
        assert!(
            w.grad().equal(&w0.grad()),
            "early stop {asked:?}: the gradient differs from the model without checkpoints"
        );
        let _ = w.grad().zero_();
    }
    println!("abort_crate: ok");
}
