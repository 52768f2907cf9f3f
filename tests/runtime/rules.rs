//! Rules of docs/semantics.md that no other test pins down, each on the
//! smallest closure that shows it.

use crate::common::{assert_bitwise, counter, grad_of, input};
use remat::{
    autograd::is_placeholder, checkpoint, diagnostics::memory_report, is_recomputing,
    recompute_needs_tensor, region, Determinism, Policy, TensorHooks,
};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tch::{Kind, Tensor};

#[test]
// docs/semantics.md, rule C5.
fn with_grad_on_but_nothing_requiring_grad_nothing_is_kept_or_replayed() {
    let runs = counter();
    let r = runs.clone();
    let kept: Arc<Mutex<Option<remat::storage::WeakStorage>>> = Arc::default();
    let k = kept.clone();
    let x = input().detach(); // requires no grad, and no parameter does
    let y = checkpoint("c").call(&x, move |x| {
        r.fetch_add(1, Ordering::SeqCst);
        let h = region("s", Policy::Save).call(&x, |x| x.exp());
        *k.lock().unwrap() = remat::storage::WeakStorage::new(&h);
        recompute_needs_tensor(&h);
        h.sin().sum(Kind::Float)
    });
    assert!(!y.requires_grad());
    // No graph holds the checkpoint: what the `Save` region would keep is
    // already gone (with grad on it is kept until backward).
    assert!(!kept.lock().unwrap().as_ref().unwrap().is_alive());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
// docs/semantics.md, rule R4.
fn an_inner_region_of_a_recompute_region_keeps_its_own_policy() {
    let (outer, inner) = (counter(), counter());
    let (o, i) = (outer.clone(), inner.clone());
    let x = input();
    let y = checkpoint("c").call(&x, move |x| {
        region("outer", Policy::Recompute).call(&x, |x| {
            o.fetch_add(1, Ordering::SeqCst);
            let h = region("inner", Policy::Save).call(x, |x| {
                i.fetch_add(1, Ordering::SeqCst);
                x.exp()
            });
            recompute_needs_tensor(&h);
            h.sin().sum(Kind::Float)
        })
    });
    let g = grad_of(&x, &y);
    // The outer body replays; the inner `save` is skipped and served.
    assert_eq!(
        (outer.load(Ordering::SeqCst), inner.load(Ordering::SeqCst)),
        (2, 1)
    );
    let plain = input();
    assert_bitwise(
        &g,
        &grad_of(&plain, &plain.exp().sin().sum(Kind::Float)),
        "gradient",
    );
}

#[test]
// docs/semantics.md, rule R7.
fn tuple_and_vec_outputs_with_absent_items_keep_their_shape_on_replay() {
    let shapes = Arc::new(Mutex::new(Vec::new()));
    let s = shapes.clone();
    let x = input();
    let y = checkpoint("c").call(&x, move |x| {
        let (a, none): (Tensor, Option<Tensor>) =
            region("pair", Policy::Save).call(&x, |x| (x.exp(), None));
        let v: Vec<Option<Tensor>> =
            region("vec", Policy::Save).call(&x, |x| vec![None, Some(x.sin()), None]);
        if is_recomputing() {
            s.lock().unwrap().push((
                none.is_none(),
                v.iter().map(Option::is_some).collect::<Vec<_>>(),
            ));
        }
        let b = v[1].as_ref().unwrap();
        recompute_needs_tensor(&a);
        recompute_needs_tensor(b);
        (&a * b).sum(Kind::Float)
    });
    let g = grad_of(&x, &y);
    assert_eq!(*shapes.lock().unwrap(), [(true, vec![false, true, false])]);
    let plain = input();
    let expected = grad_of(&plain, &(plain.exp() * plain.sin()).sum(Kind::Float));
    assert_bitwise(&g, &expected, "gradient");
}

#[test]
// docs/semantics.md, rule P2.
fn a_served_value_requires_grad_exactly_when_its_original_did() {
    let served = Arc::new(Mutex::new(Vec::new()));
    let s = served.clone();
    let x = input();
    let constant = Tensor::from_slice(&[1.5f32, 2.5]).view([1, 2]);
    let y = checkpoint("c").call(&x, move |x| {
        let a = region("grad", Policy::Save).call(&x, |x| x.exp());
        let b = region("nograd", Policy::Save).call(&constant, |c| c.exp());
        recompute_needs_tensor(&a);
        recompute_needs_tensor(&b);
        if is_recomputing() {
            let mut s = s.lock().unwrap();
            for t in [&a, &b] {
                s.push((t.requires_grad(), t.is_leaf(), is_placeholder(t)));
            }
        }
        (a * b).sum(Kind::Float)
    });
    let _ = grad_of(&x, &y);
    assert_eq!(
        *served.lock().unwrap(),
        [(true, false, false), (false, true, false)],
        "served as on the forward: non-leaf requiring grad, and plain data"
    );
}

#[test]
// docs/semantics.md, rule K4.
fn recompute_needs_tensor_does_nothing_outside_a_forward_or_on_other_tensors() {
    // Outside any checkpoint: nothing happens.
    recompute_needs_tensor(&input());
    let kept = Arc::new(Mutex::new(Vec::new()));
    let k = kept.clone();
    let x = input();
    let y = checkpoint("c").call(&x, move |x| {
        let h = region("s", Policy::Save).call(&x, |x| x * 2.0);
        // On the checkpoint's input and on bare code's own tensor: nothing
        // to keep (replay reproduces both).
        let bare = x.sin();
        recompute_needs_tensor(&x);
        recompute_needs_tensor(&bare);
        if !is_recomputing() {
            k.lock()
                .unwrap()
                .push(memory_report().unwrap().total_bytes());
            recompute_needs_tensor(&h); // the Save output: now kept
            k.lock()
                .unwrap()
                .push(memory_report().unwrap().total_bytes());
        } else {
            recompute_needs_tensor(&h); // on replay: does nothing
        }
        (&h * bare).sum(Kind::Float)
    });
    let g = grad_of(&x, &y);
    assert_eq!(*kept.lock().unwrap(), [0, 16]);
    let plain = input();
    let expected = grad_of(&plain, &((&plain * 2.0) * plain.sin()).sum(Kind::Float));
    assert_bitwise(&g, &expected, "gradient");
}

#[test]
// docs/semantics.md, rule C13 (E9).
fn determinism_metadata_catches_a_dtype_mismatch() {
    let x = input();
    let y = checkpoint("c")
        .determinism(Determinism::Metadata)
        .call(&x, |x| {
            // A bug: replay computes in double precision.
            let x = if is_recomputing() {
                x.to_kind(Kind::Double)
            } else {
                x
            };
            x.sin().sum(Kind::Float)
        });
    let err = y.f_backward().unwrap_err().to_string();
    assert!(
        err.contains("checkpoint `c`: saved tensor 0 differs between forward and replay")
            && err.contains("Double"),
        "{err}"
    );
    // (A device mismatch is reported the same way; it needs a GPU to show.)
}

#[test]
// docs/semantics.md, rule T4.
fn a_checkpoints_own_hook_pair_wins_over_the_ambient_one() {
    let (ambient, own) = (counter(), counter());
    let count = |c: &Arc<std::sync::atomic::AtomicUsize>| {
        let c = c.clone();
        TensorHooks::new(
            move |t: Tensor| {
                c.fetch_add(1, Ordering::SeqCst);
                t
            },
            |t: &Tensor| t.shallow_clone(),
        )
    };
    let x = input();
    let y = {
        let _ambient = count(&ambient).push();
        checkpoint("c")
            .saved_tensors_hooks(count(&own))
            .call(&x, |x| {
                let h = region("s", Policy::Save).call(&x, |x| x.exp());
                recompute_needs_tensor(&h);
                h.sin()
            })
    };
    // The input, exp's result, and `h` kept for replay: all through `own`.
    assert_eq!(
        (ambient.load(Ordering::SeqCst), own.load(Ordering::SeqCst)),
        (0, 3)
    );
    let g = grad_of(&x, &y.sum(Kind::Float));
    let plain = input();
    assert_bitwise(
        &g,
        &grad_of(&plain, &plain.exp().sin().sum(Kind::Float)),
        "gradient",
    );
}

#[test]
// docs/semantics.md, rule R2 (E3).
fn a_duplicate_region_name_on_replay_is_an_error_naming_both() {
    let x = input();
    let y = checkpoint("layers.3").call(&x, |x| {
        // A bug: the second name depends on the phase.
        let second = if is_recomputing() { "a" } else { "b" };
        let h = region("a", Policy::Recompute).call(&x, |x| x.sin());
        region(second, Policy::Recompute).call(&h, |h| h.sin().sum(Kind::Float))
    });
    let err = y.f_backward().unwrap_err().to_string();
    assert!(
        err.contains(
            "region `layers.3::a`: the name is used twice in one replay of checkpoint `layers.3`"
        ),
        "{err}"
    );
}
