//! A recomputation that takes another path than its forward fails at the
//! first difference, naming the checkpoint, both steps and where each was
//! reached; the same programs without the difference give the plain
//! gradients (docs/semantics.md, rules R5 and R11; E36). What only the
//! forward does (a mark it alone makes, logging) stays allowed, and an
//! early stop checks the path up to the stop.

use crate::common::{assert_bitwise, input};
use crate::plain::{same_as_plain, teach};
use remat::autograd::backward_with;
use remat::io::Arg;
use remat::policies::PolicyTable;
use remat::{checkpoint, is_recomputing, needs, recompute_needs_tensor, region, Policy, Saved};
use tch::{Kind, Tensor};

/// The error of the backward through `body` in checkpoint `c`.
fn divergence(body: fn(Tensor) -> Tensor) -> String {
    let x = input();
    let y = checkpoint("c").early_stop(false).call(&x, body);
    let err = backward_with(&y.sum(Kind::Float), false).expect_err("the paths differ");
    let err = err.to_string();
    assert!(
        err.starts_with("checkpoint `c`: recomputation left its forward's path: "),
        "{err}"
    );
    err
}

fn assert_names(err: &str, parts: &[&str]) {
    for part in parts {
        assert!(err.contains(part), "missing `{part}` in: {err}");
    }
}

#[test]
// docs/semantics.md, rule R11: a `recompute` region in the `None` arm of
// `on_forward()`, which only recomputation reaches.
fn a_region_only_recomputation_enters() {
    let err = divergence(|x| {
        let a = region("a", Policy::Save).call_saved(&x, teach);
        let a = match a.on_forward() {
            Some(a) => a,
            None => region("fallback", Policy::Recompute).call(a, |a| a * 1.0),
        };
        (&x * a).sin()
    });
    assert_names(
        &err,
        &[
            "its recomputation entered region `c::fallback` (`recompute`, 1 tensor input) at tests/runtime/path.rs:",
            "after its forward's last step",
            "the last step both took: it entered region `c::a` (`save`, 1 tensor input) at tests/runtime/path.rs:",
        ],
    );
    same_as_plain("the region on both paths", &[false], |x| {
        let a = region("a", Policy::Save).call_saved(&x, teach);
        let a = region("fallback", Policy::Recompute).call(a, |a| a * 1.0);
        (&x * a).sin()
    });
}

#[test]
// docs/semantics.md, rule R11: an argument only recomputation passes, to a
// `recompute` region and to a `save` region (whose rebuilt saves would
// otherwise come from the wrong input).
fn an_argument_only_recomputation_passes() {
    let recompute = divergence(|x| {
        let a = region("a", Policy::Save).call_saved(&x, teach);
        let extra = if is_recomputing() { Some(&a) } else { None };
        let y = region("use", Policy::Recompute).call((Arg(&x), Arg(extra)), |(x, e)| {
            x.sin() + e.map_or(0.0.into(), |e| e.sum(Kind::Float))
        });
        &x * y
    });
    assert_names(
        &recompute,
        &[
            "its recomputation entered region `c::use` (`recompute`, 2 tensor inputs)",
            "where its forward entered region `c::use` (`recompute`, 1 tensor input)",
        ],
    );
    let save = divergence(|x| {
        let a = x.cos();
        let extra = if is_recomputing() { Some(&a) } else { None };
        let y = region("use", Policy::Save).call((Arg(extra), Arg(&x)), |(_, x)| x.sin() * x);
        &x * y
    });
    assert_names(
        &save,
        &[
            "its recomputation entered region `c::use` (`save`, 2 tensor inputs)",
            "where its forward entered region `c::use` (`save`, 1 tensor input)",
        ],
    );
    same_as_plain("the argument on both paths", &[false], |x| {
        let a = region("a", Policy::Save).call_saved(&x, teach);
        let y = region("use", Policy::Recompute).call((Arg(&x), Arg(Some(&a))), |(x, e)| {
            x.sin() + e.unwrap().sum(Kind::Float)
        });
        &x * y
    });
}

#[test]
// docs/semantics.md, rule R11: the forward marks chunk 0 of an output,
// recomputation chunks 0 and 1. Rule K6 kept the whole output, so the
// extra mark would get real data and the gradients would silently be those
// of another computation.
fn one_mark_more_than_the_forward_made() {
    let err = divergence(|x| {
        let a = region("qkv", Policy::Save).call_saved(&x, teach);
        let n = if is_recomputing() { 2 } else { 1 };
        let mut acc = x.sin();
        for chunk in a.chunk(2, 1).into_iter().take(n) {
            acc += needs(chunk);
        }
        &x * acc
    });
    assert_names(
        &err,
        &[
            "its recomputation marked `c::qkv.out` with `needs` at tests/runtime/path.rs:",
            "one time more than its forward did there (once, at tests/runtime/path.rs:",
            "after it entered region `c::qkv` (`save`, 1 tensor input) at tests/runtime/path.rs:",
        ],
    );
    same_as_plain("the same marks on both paths", &[false], |x| {
        let a = region("qkv", Policy::Save).call_saved(&x, teach);
        let mut acc = x.sin();
        for chunk in a.chunk(2, 1) {
            acc += needs(chunk);
        }
        &x * acc
    });
}

#[test]
// docs/semantics.md, rule R11: `*needs(&mut a) = ..` on recomputation only
// replaced a served value with another, silently.
fn a_mutable_mark_only_recomputation_makes() {
    let err = divergence(|x| {
        let mut a = region("a", Policy::Save).call_saved(&x, teach);
        if is_recomputing() {
            *needs(&mut a) = x.zeros_like();
        }
        let y = region("use", Policy::Recompute).call(&a, |a| a.sin());
        &x * y
    });
    assert_names(
        &err,
        &[
            "its recomputation marked `c::a.out` with `needs` at tests/runtime/path.rs:",
            "where its forward asked for no such output (after it entered region `c::a` (`save`, 1 tensor input)",
            "before it entered region `c::use` (`recompute`, 1 tensor input)",
        ],
    );
}

#[test]
// docs/semantics.md, rule R11: the same mutable mark on both paths.
fn a_mutable_mark_on_both_paths_is_the_plain_model() {
    same_as_plain("mutable mark on both paths", &[false], |x| {
        let mut a = region("a", Policy::Save).call_saved(&x, teach);
        *needs(&mut a) = needs(&mut a).cos();
        let y = region("use", Policy::Recompute).call(&a, |a| a.sin());
        &x * y
    });
}

#[test]
// docs/semantics.md, rules R11 and C4: the nested `auto` checkpoint with
// its table active through backward takes the forward's path.
fn a_nested_auto_checkpoint_whose_table_lasts_through_backward() {
    let table = PolicyTable::new().checkpoint("inner", false);
    let grad = |on: bool| {
        let x = input();
        table
            .scope(|| {
                let y = checkpoint("outer").enabled(on).call(&x, |x| {
                    let h = checkpoint("inner").auto().call(&x, |x| x.sin().exp());
                    &x * h
                });
                backward_with(&y.sum(Kind::Float), false).expect("the same path");
            })
            .unwrap();
        x.grad()
    };
    assert_bitwise(&grad(true), &grad(false), "auto inner, table active");
}

#[test]
// docs/semantics.md, rule R11: an ask of the untyped API only
// recomputation makes.
fn an_untyped_ask_only_recomputation_makes() {
    let err = divergence(|x| {
        let a = region("a", Policy::Save).call(&x, teach);
        recompute_needs_tensor(&a);
        if is_recomputing() {
            recompute_needs_tensor(&a);
        }
        &x * a
    });
    assert_names(
        &err,
        &[
            "its recomputation asked for `c::a.out` with `recompute_needs_tensor` at tests/runtime/path.rs:",
            "one time more than its forward did there (once, at tests/runtime/path.rs:",
        ],
    );
}

#[test]
// docs/semantics.md, rules R11 and C4: a nested `auto` checkpoint that a
// policy table switched off on the forward, and that no table switches off
// when backward recomputes the outer one.
fn a_nested_auto_checkpoint_whose_table_ended_before_backward() {
    let x = input();
    let table = PolicyTable::new().checkpoint("inner", false);
    let y = table
        .scope(|| {
            checkpoint("outer").call(&x, |x| {
                let h = checkpoint("inner").auto().call(&x, |x| x.sin().exp());
                &x * h
            })
        })
        .unwrap();
    let err = backward_with(&y.sum(Kind::Float), false)
        .unwrap_err()
        .to_string();
    assert_names(
        &err,
        &[
            "checkpoint `outer`: recomputation left its forward's path",
            "its recomputation ran checkpoint `inner` as a checkpoint at tests/runtime/path.rs:",
            "where its forward ran checkpoint `inner` as plain code (switched off by the active plan or policy table) at tests/runtime/path.rs:",
        ],
    );
}

#[test]
// docs/semantics.md, rule R11: a nested checkpoint only recomputation calls.
fn a_checkpoint_only_recomputation_calls() {
    let err = divergence(|x| {
        let h = if is_recomputing() {
            checkpoint("extra").call(&x, |x| x.sin())
        } else {
            x.sin()
        };
        &x * h
    });
    assert_names(
        &err,
        &["its recomputation ran checkpoint `extra` as a checkpoint at tests/runtime/path.rs:"],
    );
}

#[test]
// docs/semantics.md, rule R11: what only the forward does is allowed: a
// mark it alone makes, and logging from `on_forward()`.
fn forward_only_marks_and_logging_are_allowed() {
    same_as_plain("forward-only mark and logging", &[false], |x| {
        let a: Saved<Tensor> = region("a", Policy::Save).call_saved(&x, teach);
        if let Some(seen) = a.on_forward() {
            assert!(seen.size() == [2, 2]);
        }
        if !is_recomputing() {
            let _ = needs(&a).sum(Kind::Float);
        }
        let y = region("use", Policy::Recompute).call(&a, |a| a.sin());
        &x * y
    });
}

#[test]
// docs/semantics.md, rules R11 and C17: an early stop checks the path up
// to the stop; the tail it does not run is not checked, and without the
// stop the same tail is.
fn an_early_stop_checks_its_prefix() {
    fn body(x: Tensor) -> Tensor {
        let y = x.sin(); // the last save
        if !is_recomputing() {
            // A region the forward alone enters, after the last save.
            let _ = region("log", Policy::Recompute).call(&y, |y| y * 1.0);
        }
        y * 2.0
    }
    let x = input();
    let y = checkpoint("c").early_stop(true).call(&x, body);
    backward_with(&y.sum(Kind::Float), false).expect("the prefix took the forward's path");
    let err = divergence(body);
    assert_names(
        &err,
        &["its recomputation ended without entering region `c::log` (`recompute`, 1 tensor input), which its forward entered at tests/runtime/path.rs:"],
    );
}
