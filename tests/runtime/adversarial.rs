//! An adversarial round against asks through views (docs/semantics.md,
//! rule K9) and the path check (rule R11): programs of the issue's shapes
//! and others. Valid ones give the plain gradients bit for bit; invalid
//! ones fail with the message the rules promise; what the path check
//! cannot see (values that differ on one path only) is left to
//! `Determinism::Bitwise` (docs/dsl.md, rule Y8), which reports it.

use crate::common::input;
use crate::plain::{same_as_plain, teach};
use remat::autograd::backward_with;
use remat::{
    checkpoint, is_recomputing, needs, recompute_needs_tensor, region, Determinism, Policy, Saved,
};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use tch::{Kind, Tensor};

fn error_of(ckpt: remat::Checkpoint, body: impl Fn(Tensor) -> Tensor + Send + 'static) -> String {
    let x = input();
    let y = ckpt.call(&x, body);
    backward_with(&y.sum(Kind::Float), false)
        .expect_err("the run must fail")
        .to_string()
}

#[test]
// rule K9: a view of another dtype over a detach: the output comes back
// in its own dtype.
fn a_view_of_another_dtype_asks_for_the_output() {
    same_as_plain("view_dtype of a detach", &[false, true], |x| {
        let t = region("r", Policy::Save)
            .call(&x, teach)
            .detach()
            .view_dtype(Kind::Int);
        recompute_needs_tensor(&t);
        &x * t.view_dtype(Kind::Float)
    });
}

#[test]
// rule K9: a non-contiguous output, rebuilt with its strides.
fn a_transposed_output_through_a_detach() {
    same_as_plain("transposed output", &[false, true], |x| {
        let t = region("r", Policy::Save)
            .call_saved(&x, |x| teach(x).transpose(0, 1))
            .detach();
        let t = needs(t);
        &x * t
    });
}

#[test]
// rules K6 and K9: two outputs on one storage; only a detach of the second
// lives. Both come back (one ask keeps every output on the storage).
fn outputs_sharing_a_storage_asked_through_one_detach() {
    same_as_plain("chunks of one storage", &[false, true], |x| {
        let parts: Vec<Saved<Tensor>> =
            region("r", Policy::Save).call_saved(&x, |x| teach(x).chunk(2, 0));
        let second = parts.into_iter().nth(1).expect("two chunks").detach();
        let second = needs(second);
        &x * second
    });
}

#[test]
// rule R11: region names from a counter that goes on counting.
fn region_names_that_differ_between_the_runs() {
    let counter = Arc::new(AtomicUsize::new(0));
    let err = error_of(checkpoint("c"), move |x| {
        let name = format!("r{}", counter.fetch_add(1, SeqCst));
        let h = region(name, Policy::Recompute).call(&x, |x| x.sin());
        &x * h
    });
    assert!(
        err.contains("its recomputation entered region `c::r1` (`recompute`, 1 tensor input)")
            && err.contains("where its forward entered region `c::r0`"),
        "{err}"
    );
}

#[test]
// rule R11: a loop of regions that runs once more on recomputation.
fn a_loop_of_regions_that_runs_once_more() {
    let err = error_of(checkpoint("c"), |x| {
        let n = if is_recomputing() { 3 } else { 2 };
        let mut h = x.shallow_clone();
        for i in 0..n {
            h = region(format!("layer{i}"), Policy::Recompute).call(&h, |h| h.sin());
        }
        &x * h
    });
    assert!(
        err.contains("its recomputation entered region `c::layer2`")
            && err.contains("after its forward's last step")
            && err.contains("the last step both took: it entered region `c::layer1`"),
        "{err}"
    );
}

#[test]
// rule R11: the closure swallows the error of the divergent region; the
// recomputation fails with it anyway.
fn a_divergence_the_closure_swallows_still_fails() {
    let err = error_of(checkpoint("c"), |x| {
        if is_recomputing() {
            let _ = region("only", Policy::Save).try_call(&x, |x| x.cos());
        }
        x.sin() * &x
    });
    assert!(
        err.contains("its recomputation entered region `c::only` (`save`, 1 tensor input)"),
        "{err}"
    );
}

#[test]
// rules K8 and R11: a nested checkpoint asks for its outer checkpoint's
// save output (its input) only while the outer one recomputes: the outer
// one reports it.
fn a_nested_ask_only_the_outer_recomputation_makes() {
    let runs = Arc::new(AtomicUsize::new(0));
    let err = error_of(checkpoint("outer"), move |x| {
        let again = runs.fetch_add(1, SeqCst) > 0;
        let a = region("proj", Policy::Save).call(&x, teach);
        let h = checkpoint("inner").call(&a, move |a| {
            if again {
                recompute_needs_tensor(&a);
            }
            a.sin()
        });
        &x * h
    });
    assert!(
        err.starts_with("checkpoint `outer`: recomputation left its forward's path")
            && err.contains(
                "its recomputation asked for `outer::proj.out` with `recompute_needs_tensor`"
            )
            && err.contains("after it ran checkpoint `inner` as a checkpoint"),
        "{err}"
    );
}

#[test]
// docs/dsl.md, rule Y8: two marked saves swapped on recomputation only
// take the forward's path (the same asks, in a different order), so only
// their values differ: `Determinism::Bitwise` reports it.
fn swapped_marked_saves_are_left_to_bitwise_determinism() {
    let body = |x: Tensor| {
        let a = region("a", Policy::Save).call_saved(&x, teach);
        let b = region("b", Policy::Save).call_saved(&x, |x| x * 5.0);
        let (p, q) = if is_recomputing() {
            (needs(b), needs(a))
        } else {
            (needs(a), needs(b))
        };
        (&x * p).sin() + q
    };
    let err = error_of(checkpoint("c").determinism(Determinism::Bitwise), body);
    assert!(
        err.contains("has other values on replay than on the forward (Determinism::Bitwise)"),
        "{err}"
    );
}

thread_local! {
    static CACHE: RefCell<Option<Tensor>> = const { RefCell::new(None) };
}

#[test]
// docs/dsl.md, rule Y8: a `thread_local!` the forward fills and the
// recomputation finds empty changes values, not the path.
fn a_thread_local_found_empty_is_left_to_bitwise_determinism() {
    CACHE.with(|c| *c.borrow_mut() = Some(Tensor::from_slice(&[2.0f32])));
    let err = error_of(checkpoint("c").determinism(Determinism::Bitwise), |x| {
        let scale = CACHE
            .with(|c| c.borrow_mut().take())
            .unwrap_or_else(|| Tensor::from_slice(&[1.0f32]));
        (&x * scale).sin() * &x
    });
    assert!(err.contains("(Determinism::Bitwise)"), "{err}");
}
