//! Checkpoint state lifetime, checked with the process-wide live count: in a
//! test binary of its own, one test, so nothing else runs meanwhile.

use remat_reference::testing as common;

use common::{assert_bitwise, counter, grad_of, input, message};
use remat::{
    checkpoint, diagnostics::live_checkpoints, is_recomputing, recompute_needs_tensor, region,
    Policy,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tch::{Kind, Tensor};

#[test]
// docs/semantics.md, rules M3 and D6.
fn checkpoint_state_lives_exactly_as_long_as_its_graph() {
    a_panic_on_the_forward_leaves_nothing_behind();
    a_graph_dropped_without_backward_frees_its_checkpoints();
    grad_mode_off_runs_the_closure_once_as_plain_code();
    assert_eq!(live_checkpoints(), 0);
}

// docs/semantics.md, rule C11.
fn a_panic_on_the_forward_leaves_nothing_behind() {
    let x = input();
    let before = live_checkpoints();
    let r = catch_unwind(AssertUnwindSafe(|| {
        checkpoint("c").call(&x, |x| -> Tensor {
            let _a = region("p", Policy::Save).call(&x, |x| x.sin());
            panic!("body failed")
        })
    }));
    assert!(message::<Tensor>(r).contains("body failed"));
    assert!(!is_recomputing());
    // Plain autograd and the next checkpoint work normally.
    let g = grad_of(&x, &x.sin().sum(Kind::Float));
    assert_bitwise(&g, &tch::no_grad(|| x.cos()), "plain gradient");
    let y = checkpoint("d").call(&x, |x| {
        region("p", Policy::Recompute)
            .call(&x, |x| x.sin())
            .sum(Kind::Float)
    });
    assert_bitwise(
        &grad_of(&x, &y),
        &tch::no_grad(|| x.cos()),
        "checkpoint gradient",
    );
    assert_eq!(live_checkpoints(), before);
}

// docs/semantics.md, rule M3.
fn a_graph_dropped_without_backward_frees_its_checkpoints() {
    let before = live_checkpoints();
    let x = input();
    let kept = Arc::new(std::sync::Mutex::new(None));
    let k = kept.clone();
    let y = checkpoint("c").call(&x, move |x| {
        // exp keeps its result (a Save region's save) and it is kept.
        let a = region("p", Policy::Save).call(&x, |x| (x * 2.0).exp());
        *k.lock().unwrap() = remat::storage::WeakStorage::new(&a);
        recompute_needs_tensor(&a);
        (a * 2).exp()
    });
    assert_eq!(live_checkpoints(), before + 1);
    let kept = kept.lock().unwrap().take().unwrap();
    assert!(kept.is_alive(), "kept for backward");
    drop(y);
    assert_eq!(live_checkpoints(), before);
    assert!(!kept.is_alive(), "the kept bytes went with the graph");
}

// docs/semantics.md, rule C4.
fn grad_mode_off_runs_the_closure_once_as_plain_code() {
    let runs = counter();
    let r = runs.clone();
    let x = input();
    let y = tch::no_grad(|| {
        checkpoint("c").call(&x, move |x| {
            r.fetch_add(1, Ordering::SeqCst);
            region("p", Policy::Save).call(&x, |x| x.sin())
        })
    });
    assert!(!y.requires_grad());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(live_checkpoints(), 0);
}
