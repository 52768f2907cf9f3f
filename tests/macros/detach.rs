//! The detach shapes with the macros: a save output whose only live handle
//! is a `detach()` (or a view of one) is kept when marked, passed to a
//! `recompute` region or returned by a checkpoint switched off, and the
//! gradients are the plain body's, under strict recomputation and without
//! it (docs/semantics.md, rule K9).

use crate::common::{assert_bitwise, input};
use remat::{checkpoint, needs, remat, Saved};
use tch::{Kind, Tensor};

/// Saves nothing of its output.
fn teach(x: &Tensor) -> Tensor {
    x * 3.0 + 1.0
}

fn mask_of(x: &Tensor) -> Option<Tensor> {
    Some(x.gt(0.0).to_kind(Kind::Float))
}

/// A stop-gradient helper: the save output's own handle dies in it.
fn stop_gradient(t: Saved<Tensor>) -> Saved<Tensor> {
    t.detach()
}

#[checkpoint(enabled = on, strict = strict)]
fn teacher(x: &Tensor, on: bool, strict: bool) -> Tensor {
    remat! { let t = save teacher: teach(x); }
    let t = needs(stop_gradient(t));
    (x - t).square()
}

#[checkpoint(enabled = on, strict = strict)]
fn masked(x: &Tensor, on: bool, strict: bool) -> Tensor {
    remat! { let m = save mask: mask_of(x); }
    let m = needs(m.map(|m| m.detach()));
    x * m.expect("a mask")
}

#[checkpoint(enabled = on, strict = strict)]
fn through_region(x: &Tensor, on: bool, strict: bool) -> Tensor {
    remat! { let a = save proj: teach(x); }
    let head = stop_gradient(a).narrow(1, 0, 1);
    remat! { let h = recompute head: Tensor::sin(&head); }
    x * h
}

/// Switched off: its body runs in its caller, and what it returns is asked
/// of the caller's checkpoint.
#[checkpoint(enabled = false)]
fn head_of(x: &Tensor) -> Tensor {
    remat! { let a = save proj: teach(x); }
    let v = a.detach().narrow(1, 0, 1);
    v
}

#[checkpoint(enabled = on, strict = strict)]
fn returned(x: &Tensor, on: bool, strict: bool) -> Tensor {
    let h = head_of(x);
    x * h.cos()
}

fn check(what: &str, f: fn(&Tensor, bool, bool) -> Tensor) {
    let plain = {
        let x = input();
        f(&x, false, false).sum(Kind::Float).backward();
        x.grad()
    };
    for strict in [false, true] {
        let x = input();
        let result = f(&x, true, strict).sum(Kind::Float).f_backward();
        assert!(result.is_ok(), "{what}, strict {strict}: {result:?}");
        assert_bitwise(&x.grad(), &plain, &format!("{what}, strict {strict}"));
    }
}

#[test]
// docs/semantics.md, rule K9.
fn every_detach_shape_gives_the_plain_gradients() {
    check("a stop-gradient target", teacher);
    check("a mask through Option::map", masked);
    check("a view of a detach into a recompute region", through_region);
    check(
        "a view of a detach returned by a checkpoint switched off",
        returned,
    );
}
