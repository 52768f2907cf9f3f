//! Name scopes (docs/semantics.md, rule R10): a body that calls one
//! sub-block several times names each call's regions apart, on the forward
//! and on recomputation alike, and policy tables see the scoped names.

use crate::common::{assert_bitwise, counter};
use remat::diagnostics::collect_trace;
use remat::policies::PolicyTable;
use remat::{checkpoint, name_scope, recompute_needs_tensor, region, Policy};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use tch::{Kind, Tensor};

fn input() -> Tensor {
    Tensor::from_slice(&[0.3f32, -1.2, 0.7, 2.0]).set_requires_grad(true)
}

/// A sub-block with one region of `policy`, whose runs `runs` counts.
fn block(x: &Tensor, policy: Policy, runs: &Arc<AtomicUsize>) -> Tensor {
    let r = runs.clone();
    let h = region("act", policy).call(x, move |x| {
        r.fetch_add(1, SeqCst);
        x.tanh()
    });
    recompute_needs_tensor(&h);
    h * 2.0
}

#[test]
// Rule R10: two calls of one sub-block in one checkpoint, each in its own
// scope, run as two regions (without the scopes: E3), on the forward and on
// recomputation, with the plain model's gradient.
fn a_sub_block_called_twice_names_its_regions_per_scope() {
    for policy in [Policy::Save, Policy::Recompute] {
        let (x, runs) = (input(), counter());
        let r = runs.clone();
        let (y, trace) = collect_trace(|| {
            checkpoint("c").call(&x, move |x| {
                let h = name_scope("block.0", || block(&x, policy, &r));
                name_scope("block.1", || block(&h, policy, &r))
            })
        });
        let text = trace.to_string();
        assert!(
            text.contains("block.0/act") && text.contains("block.1/act"),
            "{text}"
        );
        y.sum(Kind::Float).backward();
        let expected = if policy == Policy::Save { 2 } else { 4 };
        assert_eq!(runs.load(SeqCst), expected, "{policy:?}: region runs");
        let x0 = input();
        let y0 = (x0.tanh() * 2.0).tanh() * 2.0;
        y0.sum(Kind::Float).backward();
        assert_bitwise(&x.grad(), &x0.grad(), &format!("{policy:?}: gradient"));
    }
    // Without scopes the second call reuses the name.
    let runs = counter();
    let err = checkpoint("c")
        .try_call(input(), move |x| {
            let h = block(&x, Policy::Save, &runs);
            block(&h, Policy::Save, &runs)
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`c::act`") && err.contains("used twice"),
        "{err}"
    );
}

#[test]
// Rule R10: scopes nest with `/`, close when their closure returns (also
// by a panic), and a scope open around a checkpoint call does not reach
// into its closure.
fn scopes_nest_close_and_stay_inside_their_checkpoint() {
    let x = input();
    let (y, trace) = collect_trace(|| {
        name_scope("outside", || {
            checkpoint("c").call(&x, |x| {
                let a = name_scope("a", || {
                    name_scope("b", || {
                        region("inner", Policy::Recompute).call(&x, |x| x.sin())
                    })
                });
                let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    name_scope("dropped", || panic!("a panic closes its scope"))
                }));
                assert!(caught.is_err());
                let b = region("after", Policy::Recompute).call(&a, |a| a.cos());
                a + b
            })
        })
    });
    let text = trace.to_string();
    assert!(
        text.contains("a/b/inner") && text.contains(" after") && !text.contains("outside"),
        "{text}"
    );
    assert!(!text.contains("dropped/after"), "{text}");
    y.sum(Kind::Float).backward();
}

#[test]
// Rule R10: a policy table decides `auto` regions by their scoped names.
fn policy_tables_match_the_scoped_names() {
    let (x, runs) = (input(), counter());
    let r = runs.clone();
    let table = PolicyTable::new()
        .save("c::block.0/act")
        .recompute("c::block.1/act")
        .strict(true);
    let y = table
        .scope(|| {
            checkpoint("c").call(&x, move |x| {
                let h = name_scope("block.0", || block(&x, Policy::Auto, &r));
                name_scope("block.1", || block(&h, Policy::Auto, &r))
            })
        })
        .unwrap();
    y.sum(Kind::Float).backward();
    // block.0's region saved (ran once), block.1's recomputed (twice).
    assert_eq!(runs.load(SeqCst), 3);
}

#[test]
// Rule R10: an empty prefix, or one with `::`, is refused with a message.
fn a_bad_prefix_is_refused() {
    for bad in ["", "a::b"] {
        let err = std::panic::catch_unwind(|| name_scope(bad, || ())).unwrap_err();
        let message = err.downcast_ref::<String>().unwrap();
        assert!(
            message.contains("must be non-empty and contain no `::`"),
            "{message}"
        );
    }
}
