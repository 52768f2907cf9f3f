//! Freed means freed: what a checkpoint drops after its forward is dead
//! before backward, seen through `WeakStorage` (libtorch's own storage
//! refcount), not through remat's records; and gradients stay bitwise.
//! Each test fails if the feature it names is removed: without a checkpoint,
//! autograd keeps every one of these tensors alive until backward.

use crate::common::{assert_bitwise, input};
use remat::{
    checkpoint, diagnostics::memory_report, is_recomputing, region, storage::WeakStorage, Policy,
};
use std::sync::{Arc, Mutex};
use tch::{Kind, Tensor};

/// Weak handles to tensors made inside a closure, on the forward only.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(&'static str, WeakStorage)>>>);

impl Seen {
    fn note(&self, what: &'static str, t: &Tensor) {
        if !is_recomputing() {
            let weak = WeakStorage::new(t).expect("a dense tensor");
            self.0.lock().unwrap().push((what, weak));
        }
    }

    fn alive(&self) -> Vec<&'static str> {
        let seen = self.0.lock().unwrap();
        assert!(!seen.is_empty(), "the closure noted nothing");
        seen.iter()
            .filter(|(_, w)| w.is_alive())
            .map(|(what, _)| *what)
            .collect()
    }
}

/// The body: every intermediate is saved for backward by the op after it.
fn body(x: &Tensor, seen: &Seen) -> Tensor {
    // Bare code: `h * h` saves `h` twice.
    let h = x.sin();
    seen.note("bare", &h);
    let sq = &h * &h;
    // A Recompute region: `t * t` saves `t`, made inside the body.
    let r = region("inner", Policy::Recompute).call(&sq, |sq| {
        let t = sq.cos();
        seen.note("recompute region", &t);
        &t * &t
    });
    // A Save region whose `sin` saves its input `u`, which replay
    // reproduces: rebuilt on replay, not kept.
    let u = &r + 1.0;
    seen.note("rebuilt input", &u);
    let s = region("keep", Policy::Save).call(&u, |u| u.sin());
    remat::recompute_needs_tensor(&s);
    (s * 3.0).sum(Kind::Float)
}

#[test]
// docs/semantics.md, rules M4 and C3.
fn intermediates_inside_a_checkpoint_are_dead_after_the_forward() {
    tch::set_num_threads(1);
    let seen = Seen::default();
    let x = input();
    let s = seen.clone();
    let y = checkpoint("c").call(&x, move |x| {
        let y = body(&x, &s);
        if !is_recomputing() {
            // The Save region reports `u` as rebuilt, not kept...
            let report = memory_report().unwrap();
            assert_eq!(report.regions[0].rebuilt, ["saved.0"]);
        }
        y
    });
    // ...and it is really gone, with the bare and region intermediates.
    assert_eq!(seen.alive(), Vec::<&str>::new());

    y.backward();
    let plain = input();
    body(&plain, &Seen::default()).backward();
    assert_bitwise(&x.grad(), &plain.grad(), "gradient");
}

#[test]
// The control for docs/semantics.md, rule M4.
fn without_a_checkpoint_autograd_keeps_them_all() {
    // The control: the same body outside a checkpoint keeps every one.
    let seen = Seen::default();
    let x = input();
    let y = body(&x, &seen);
    assert_eq!(seen.alive(), ["bare", "recompute region", "rebuilt input"]);
    drop(y);
    assert_eq!(seen.alive(), Vec::<&str>::new());
}

#[test]
// docs/semantics.md, rules M4 and S1.
fn a_save_regions_kept_save_stays_alive_until_backward() {
    let seen = Seen::default();
    let s = seen.clone();
    let x = input();
    let y = checkpoint("c").call(&x, move |x| {
        let e = region("exp", Policy::Save).call(&x, |x| {
            let e = x.exp(); // exp saves its result: kept
            s.note("kept", &e);
            e
        });
        remat::recompute_needs_tensor(&e);
        e.sum(Kind::Float)
    });
    assert_eq!(seen.alive(), ["kept"]);
    y.backward();
    drop(y);
    assert_eq!(seen.alive(), Vec::<&str>::new());
}
