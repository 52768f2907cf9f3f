//! Checkpoint options chosen at run time: `enabled` and strict recomputation.

use crate::common::{assert_bitwise, counter, input};
use remat::{checkpoint, diagnostics::memory_report, recompute_needs_tensor, region, Policy};
use std::sync::atomic::Ordering;
use tch::{Kind, Tensor};

/// `exp` saves its own output, so autograd keeps a `Save` region's output
/// even when nobody asks for it: a bare read then works by luck.
fn body(x: Tensor, mark: bool) -> Tensor {
    let h = region("exp", Policy::Save).call(&x, |x| x.exp());
    if mark {
        recompute_needs_tensor(&h);
    }
    h.sin().sum(Kind::Float)
}

fn grad(y: &Tensor, x: &Tensor) -> Result<Tensor, String> {
    y.f_backward().map_err(|e| e.to_string())?;
    Ok(x.grad().copy())
}

#[test]
// docs/semantics.md, rule C4.
fn a_disabled_checkpoint_is_a_plain_call() {
    let runs = counter();
    let r = runs.clone();
    let x = input();
    let y = checkpoint("off").enabled(false).call(&x, move |x| {
        r.fetch_add(1, Ordering::SeqCst);
        // No checkpoint frame: nothing is recorded, regions are plain calls.
        assert!(
            memory_report().is_err(),
            "the closure runs outside a checkpoint"
        );
        body(x, false)
    });
    let g = grad(&y, &x).expect("a plain graph backpropagates");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let plain = input();
    let expected = grad(&body(plain.shallow_clone(), false), &plain).unwrap();
    assert_bitwise(&g, &expected, "gradient");
}

#[test]
// docs/semantics.md, rule C6.
fn an_enabled_checkpoint_replays() {
    let runs = counter();
    let r = runs.clone();
    let x = input();
    let y = checkpoint("on").enabled(true).call(&x, move |x| {
        r.fetch_add(1, Ordering::SeqCst);
        body(x, true)
    });
    assert!(grad(&y, &x).is_ok());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
// docs/semantics.md, rule S8.
fn without_strict_replay_an_unasked_read_of_a_kept_output_works_by_luck() {
    let x = input();
    let y = checkpoint("lax")
        .strict_recompute(false)
        .call(&x, |x| body(x, false));
    assert!(grad(&y, &x).is_ok());
}

#[test]
// docs/semantics.md, rule P5.
fn strict_replay_serves_a_placeholder_for_every_output_nobody_asked_for() {
    let x = input();
    let y = checkpoint("strict")
        .strict_recompute(true)
        .call(&x, |x| body(x, false));
    let err = grad(&y, &x).unwrap_err();
    assert!(
        err.contains("`strict::exp.out` is a placeholder") && err.contains("Strict replay is on"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rules P5 and K4.
fn strict_replay_serves_what_was_asked_for_with_bitwise_gradients() {
    let x = input();
    let y = checkpoint("strict")
        .strict_recompute(true)
        .call(&x, |x| body(x, true));
    let g = grad(&y, &x).unwrap();
    let plain = input();
    let expected = grad(&body(plain.shallow_clone(), true), &plain).unwrap();
    assert_bitwise(&g, &expected, "gradient");
}

#[test]
// docs/semantics.md, rules P5 and K2.
fn strict_replay_serves_outputs_a_recompute_region_asked_for() {
    let x = input();
    let y = checkpoint("strict").strict_recompute(true).call(&x, |x| {
        let h = region("exp", Policy::Save).call(&x, |x| x.exp());
        region("sin", Policy::Recompute).call(&h, |h| h.sin().sum(Kind::Float))
    });
    assert!(grad(&y, &x).is_ok());
}
