//! The path shapes written with the macros: a recomputation that leaves its
//! forward's path fails where it does, naming the checkpoint and both steps
//! (docs/semantics.md, rule R11, E36), and the same bodies without the
//! difference give the plain gradients.

use crate::common::{assert_bitwise, input};
use remat::autograd::backward_with;
use remat::{checkpoint, is_recomputing, remat, Policy};
use tch::{Kind, Tensor};

fn teach(x: &Tensor) -> Tensor {
    x * 3.0 + 1.0
}

/// `region [p]` whose policy is `save` on the forward and `recompute` on
/// recomputation (or the same on both when `same`).
#[checkpoint(name = "c", enabled = on)]
fn policy_flip(x: &Tensor, on: bool, same: bool) -> Tensor {
    let p = if is_recomputing() && !same {
        Policy::Recompute
    } else {
        Policy::Save
    };
    remat! {
        let a = region [p] proj: teach(x);
        needs a;
    }
    x * a
}

/// Marks chunk 0 on the forward, chunks 0 and 1 on recomputation (or both
/// on both when `same`).
#[checkpoint(name = "c", enabled = on)]
fn marks_in_a_loop(x: &Tensor, on: bool, same: bool) -> Tensor {
    remat! { let qkv = save qkv: teach(x); }
    let n = if is_recomputing() || same { 2 } else { 1 };
    let mut acc = x.sin();
    for chunk in qkv.chunk(2, 1).into_iter().take(n) {
        remat! { needs chunk; }
        acc += chunk;
    }
    x * acc
}

/// A `recompute` region in the `None` arm of `on_forward()` (or in both
/// arms when `same`).
#[checkpoint(name = "c", enabled = on)]
fn fallback_region(x: &Tensor, on: bool, same: bool) -> Tensor {
    remat! { let a = save proj: teach(x); }
    let a = match a.on_forward() {
        Some(seen) if !same => seen,
        _ => {
            remat! { let b = recompute fallback: Tensor::sin(&a); }
            b
        }
    };
    x * a
}

fn diverges(f: fn(&Tensor, bool, bool) -> Tensor, parts: &[&str]) {
    let x = input();
    let err = backward_with(&f(&x, true, false).sum(Kind::Float), false)
        .expect_err("the paths differ")
        .to_string();
    assert!(
        err.starts_with("checkpoint `c`: recomputation left its forward's path"),
        "{err}"
    );
    for part in parts {
        assert!(err.contains(part), "missing `{part}` in: {err}");
    }
    let plain = {
        let x = input();
        f(&x, false, true).sum(Kind::Float).backward();
        x.grad()
    };
    let x = input();
    f(&x, true, true).sum(Kind::Float).backward();
    assert_bitwise(&x.grad(), &plain, "the same body on both paths");
}

#[test]
// docs/semantics.md, rule R11.
fn a_region_whose_policy_differs() {
    diverges(
        policy_flip,
        &[
            "its recomputation entered region `c::proj` (`recompute`, 1 tensor input) at tests/macros/path.rs:",
            "where its forward entered region `c::proj` (`save`, 1 tensor input) at tests/macros/path.rs:",
        ],
    );
}

#[test]
// docs/semantics.md, rule R11.
fn a_loop_whose_marks_differ() {
    diverges(
        marks_in_a_loop,
        &[
            "its recomputation marked `c::qkv.out` with `needs` at tests/macros/path.rs:",
            "one time more than its forward did there (once, at tests/macros/path.rs:",
        ],
    );
}

#[test]
// docs/semantics.md, rule R11.
fn a_region_only_recomputation_reaches() {
    diverges(
        fallback_region,
        &["its recomputation entered region `c::fallback` (`recompute`, 1 tensor input) at tests/macros/path.rs:"],
    );
}
