//! The thread state recomputation runs under (docs/semantics.md, rules
//! A1-A6), one test each: what it restores, and what it deliberately
//! leaves as backward's caller has it. Autocast (A2) is in `autocast.rs`,
//! state hooks (A5) in `behaviour.rs` and `tests/rng/`.

use crate::common::counter;
use remat::autograd::grad_enabled;
use remat::{checkpoint, is_recomputing, saved_tensors_hooks};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use tch::{kind::FLOAT_CPU, Kind, Tensor};

fn input() -> Tensor {
    Tensor::from_slice(&[0.5f32, -1.0, 2.0]).set_requires_grad(true)
}

/// A1: grad mode is on during recomputation even when backward is called
/// with it off, and is off again after.
#[test]
fn a1_recomputation_runs_with_grad_mode_on() {
    let x = input();
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let y = checkpoint("c").call(&x, move |x| {
        if is_recomputing() {
            s.store(1 + grad_enabled() as usize, SeqCst);
        }
        x.sin().sum(Kind::Float)
    });
    tch::no_grad(|| {
        y.backward();
        assert!(!grad_enabled());
    });
    assert_eq!(seen.load(SeqCst), 2, "recomputation ran with grad mode off");
    assert!(x.grad().defined());
}

/// A3: the saved-tensor hooks pushed around the backward call do not see
/// what recomputation saves (it refills the holders, not the caller's pack).
#[test]
fn a3_the_callers_saved_tensor_hooks_do_not_apply_to_recomputation() {
    let x = input();
    let y = checkpoint("c").call(&x, |x| x.sin().exp().sum(Kind::Float));
    let packs = counter();
    let p = packs.clone();
    {
        let _hooks = saved_tensors_hooks(
            move |t: Tensor| {
                p.fetch_add(1, SeqCst);
                t
            },
            |t: &Tensor| t.shallow_clone(),
        );
        y.backward();
    }
    assert_eq!(
        packs.load(SeqCst),
        0,
        "the caller's pack saw recomputation's saves"
    );
    let expected = (x.detach().cos() * x.detach().sin().exp()).copy();
    assert!(x.grad().allclose(&expected, 1e-6, 1e-6, false));
}

/// A4: `is_recomputing()` is true inside recomputation and false again
/// after; a checkpoint nested in the recomputed closure runs its own
/// forward there (false) and is recomputed in its turn (true). (Early stop
/// is off for the outer checkpoint: its last save is the inner checkpoint's
/// input, so with early stop its replay ends before the inner one runs,
/// rule C17.)
#[test]
fn a4_is_recomputing_holds_inside_recomputation_only() {
    let x = input();
    let flags = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let f = flags.clone();
    let y = checkpoint("outer").early_stop(false).call(&x, move |x| {
        f.lock().unwrap().push(("outer", is_recomputing()));
        let f = f.clone();
        checkpoint("inner").call(&x, move |x| {
            f.lock().unwrap().push(("inner", is_recomputing()));
            x.sin().sum(Kind::Float)
        })
    });
    assert!(!is_recomputing());
    y.backward();
    assert!(!is_recomputing());
    assert_eq!(
        *flags.lock().unwrap(),
        [
            ("outer", false),
            ("inner", false),
            ("outer", true),
            ("inner", false),
            ("inner", true)
        ]
    );
}

static WIDE: AtomicBool = AtomicBool::new(false);

/// A6: process-wide state is not restored: recomputation reads it as it is
/// when backward runs (here a flag of the program; libtorch's global flags,
/// such as deterministic algorithms, behave the same). A closure that
/// depends on such state must be given a state hook, or the value.
#[test]
fn a6_process_wide_state_is_read_as_it_is_at_backward() {
    let x = Tensor::ones([3], FLOAT_CPU).set_requires_grad(true);
    let runs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let r = runs.clone();
    let y = checkpoint("c").call(&x, move |x| {
        r.lock().unwrap().push(WIDE.load(SeqCst));
        x.sin().sum(Kind::Float)
    });
    WIDE.store(true, SeqCst);
    y.backward();
    WIDE.store(false, SeqCst);
    assert_eq!(*runs.lock().unwrap(), [false, true]);
}
