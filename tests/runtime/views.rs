//! Asks through a view whose save output has no handle left: a `detach()`
//! (which holds no reference to the tensor it was taken from) and views of
//! it, asked for by `needs`, `recompute_needs_tensor`, a `recompute`
//! region's argument or a checkpoint's return value. The output is kept
//! (rebuilt over the view's storage from its recorded layout), and the
//! gradients are the plain model's, under strict recomputation and without
//! it (docs/semantics.md, rule K9).

use crate::common::input;
use crate::plain::{same_as_plain, teach};
use remat::{checkpoint, needs, recompute_needs_tensor, region, Policy, Saved};
use tch::{Kind, Tensor};

#[test]
// docs/semantics.md, rule K9: a stop-gradient target, marked through its
// `detach()` once the output itself is gone.
fn a_detached_save_output_marked_with_needs() {
    same_as_plain("needs of a detach", &[false, true], |x| {
        let t = region("teacher", Policy::Save)
            .call_saved(&x, teach)
            .detach();
        let t = needs(t);
        (&x - t).square()
    });
}

#[test]
// docs/semantics.md, rules K4 and K9: the untyped API.
fn a_detached_output_of_the_untyped_api_asked_for() {
    same_as_plain("recompute_needs_tensor of a detach", &[false, true], |x| {
        let t = region("teacher", Policy::Save).call(&x, teach).detach();
        recompute_needs_tensor(&t);
        (&x - t).square()
    });
}

/// A helper that takes a save output by value and hands back a view of its
/// detached alias: the output's own handle dies in it.
fn head(t: Saved<Tensor>) -> Saved<Tensor> {
    t.detach().narrow(1, 0, 1)
}

#[test]
// docs/semantics.md, rules K2 and K9: a `recompute` region's argument.
fn a_view_of_a_detach_passed_to_a_recompute_region() {
    same_as_plain("region argument", &[false, true], |x| {
        let a = region("proj", Policy::Save).call_saved(&x, teach);
        let h = region("use", Policy::Recompute).call(&head(a), |h| h.sin());
        &x * h
    });
}

#[test]
// docs/semantics.md, rules K8 and K9: a checkpoint switched off returns a
// view of a detach; its caller's checkpoint is asked for it.
fn a_view_of_a_detach_returned_by_a_checkpoint_switched_off() {
    same_as_plain("returned", &[false, true], |x| {
        let inner = checkpoint("inner").enabled(false).call(&x, |x| {
            let a = region("proj", Policy::Save).call_saved(&x, teach);
            a.detach().narrow(1, 0, 1)
        });
        &x * inner.cos()
    });
}

#[test]
// docs/semantics.md, rules K3 and K9: the output moves on into a `save`
// region (which does not ask), a detached copy stays behind and is marked.
fn a_detached_copy_kept_while_the_output_moves_on() {
    same_as_plain("detached copy", &[false, true], |x| {
        let a = region("proj", Policy::Save).call_saved(&x, teach);
        let d = a.detach();
        let s = region("consume", Policy::Save).call_saved(a, |a| a.sin());
        let d = needs(d);
        let s = needs(s);
        &x * d + s
    });
}

#[test]
// docs/semantics.md, rule K9: `Option::map` over a mask; the output is
// gone, the map's detach lives (the shape that failed only strictly).
fn a_mask_detached_through_option_map() {
    same_as_plain("option map", &[false, true], |x| {
        let m: Option<Saved<Tensor>> =
            region("mask", Policy::Save).call_saved(&x, |x| Some(x.gt(0.0).to_kind(Kind::Float)));
        let m = needs(m.map(|m| m.detach()));
        &x * m.expect("a mask")
    });
}

#[test]
// docs/semantics.md, rules K6 and K9: the output kept whole from a view of
// any layout, dtype included, and the in-place check still sees the
// storage's version counter (rule P2, E12).
fn a_kept_rebuilt_output_is_the_whole_output_and_checks_its_version() {
    same_as_plain("a narrow view of a view of a detach", &[false, true], |x| {
        let a = region("proj", Policy::Save).call_saved(&x, teach);
        let v = a.detach().narrow(0, 1, 1).select(1, 0);
        let v = needs(v);
        let whole = needs(a); // already kept through `v`'s ask
        &x * v + whole
    });
    let x = input();
    let y = checkpoint("c").call(&x, |x| {
        let t = region("teacher", Policy::Save)
            .call_saved(&x, teach)
            .detach();
        let mut t = needs(t);
        let _ = t.g_add_scalar_(1.0); // in place, after it was kept
        &x * t
    });
    let err = y.sum(Kind::Float).f_backward().unwrap_err().to_string();
    assert!(
        err.contains("output 0 was modified in place after it was kept for replay"),
        "{err}"
    );
}
