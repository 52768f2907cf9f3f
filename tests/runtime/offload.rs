//! `Offload` regions (docs/semantics.md, rules O1-O5): gradients as under
//! `Save`, what they keep moved off (measured independently: the originals'
//! storages die), a storage moved once for all its views, the in-place
//! check, retained graphs, nesting, outputs served on replay, and the
//! user's hooks first.

use crate::common::assert_bitwise;
use remat::{
    autograd::backward_with, checkpoint, diagnostics::memory_report, diagnostics::MemoryReport,
    recompute_needs_tensor, region, storage::WeakStorage, Policy, TensorHooks,
};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tch::{Device, Kind, Tensor};

fn inputs() -> (Tensor, Tensor) {
    tch::manual_seed(7);
    let x = Tensor::randn([8, 16], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let w = Tensor::randn([16, 48], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    (x, w)
}

/// A block in the shape of attention: one matmul into a wide storage, cut
/// in three views that the next ops save, then a `Recompute` region that
/// asks for the output. `policy` is the first region's.
fn body(x: &Tensor, w: &Tensor, policy: Policy) -> Tensor {
    let h = region("qkv", policy).call((x, w), |(x, w)| {
        let qkv = x.matmul(w);
        let parts = qkv.chunk(3, -1);
        (&parts[0] * &parts[1]).exp() + parts[2].sin()
    });
    let g = region("act", Policy::Recompute).call(&h, |h| h.tanh() * 2);
    g.sin().sum(Kind::Float)
}

/// The block's loss in a checkpoint, with the memory report taken at the
/// end of its forward and a weak handle on the first region's output.
fn checkpointed(x: &Tensor, w: &Tensor, policy: Policy) -> (Tensor, MemoryReport, WeakStorage) {
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let w = w.shallow_clone();
    let loss = checkpoint("block").call(x, move |x| {
        let h = region("qkv", policy).call((&x, &w), |(x, w)| {
            let qkv = x.matmul(w);
            let parts = qkv.chunk(3, -1);
            (&parts[0] * &parts[1]).exp() + parts[2].sin()
        });
        let g = region("act", Policy::Recompute).call(&h, |h| h.tanh() * 2);
        let loss = g.sin().sum(Kind::Float);
        if !remat::is_recomputing() {
            *s.lock().unwrap() = Some((memory_report().unwrap(), WeakStorage::new(&h).unwrap()));
        }
        loss
    });
    let (report, weak) = seen.lock().unwrap().take().unwrap();
    (loss, report, weak)
}

fn grads(loss: Tensor, x: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let _ = x.grad().f_zero_();
    let _ = w.grad().f_zero_();
    loss.backward();
    (x.grad().copy(), w.grad().copy())
}

#[test]
// docs/semantics.md, rule O1: gradients bitwise equal to the plain model's
// and to `Save`'s.
fn offload_gives_the_gradients_of_save_and_of_the_plain_model() {
    let (x, w) = inputs();
    let (ex, ew) = grads(body(&x, &w, Policy::Recompute), &x, &w);
    for policy in [Policy::Save, Policy::OFFLOAD] {
        let (loss, _, _) = checkpointed(&x, &w, policy);
        let (gx, gw) = grads(loss, &x, &w);
        assert_bitwise(&gx, &ex, &format!("x under {policy:?}"));
        assert_bitwise(&gw, &ew, &format!("w under {policy:?}"));
    }
}

#[test]
// docs/semantics.md, rules O1 and O4, against an independent measure: the
// region's output storage is alive after the forward under `Save` (kept)
// and dead under `Offload` (only the copy is), and what is moved is what
// `Save` keeps, a storage once for all its views.
fn offload_releases_what_save_keeps_and_moves_each_storage_once() {
    let (x, w) = inputs();
    let (loss, saved, weak) = checkpointed(&x, &w, Policy::Save);
    assert!(weak.is_alive(), "Save keeps the region's output");
    let kept = saved.regions[0].bytes();
    assert_eq!(saved.regions[0].offloaded_bytes(), 0);
    drop(loss);

    let (loss, moved, weak) = checkpointed(&x, &w, Policy::OFFLOAD);
    assert!(!weak.is_alive(), "Offload still holds the region's output");
    let region = &moved.regions[0];
    assert_eq!(region.bytes(), 0, "{moved}");
    assert_eq!(region.offloaded_bytes(), kept, "{moved}");
    // `mul` saves two views of the matmul's result and `sin` the third:
    // one storage, moved once.
    let qkv = region
        .offloaded_storages
        .iter()
        .find(|s| s.bytes == 8 * 48 * 4)
        .unwrap_or_else(|| panic!("no copy of the 8x48 storage: {moved}"));
    assert_eq!(qkv.names.len(), 3, "{moved}");
    assert_eq!(qkv.target, Device::Cpu);
    assert!(
        moved.to_string().contains("offloaded to cpu, not resident"),
        "{moved}"
    );
    drop(loss);
}

#[test]
// docs/semantics.md, rule O3 (E11).
fn modifying_an_offloaded_tensor_in_place_errors_at_backward() {
    let (x, _) = inputs();
    let y = checkpoint("c").call(&x, |x| {
        let out = region("p", Policy::OFFLOAD).call(&x, |x| {
            let mut h = (x * 2).exp();
            let out = h.sin();
            let _ = h.g_add_(&Tensor::ones([8, 16], tch::kind::FLOAT_CPU));
            out
        });
        recompute_needs_tensor(&out);
        out.sum(Kind::Float)
    });
    let err = remat::Error::from(y.f_backward().unwrap_err()).to_string();
    assert!(
        err.contains("region `c::p`: saved tensor `saved.")
            && err.contains("was modified in place after it was offloaded (version 0, now 1)"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rules O1 and P3: a retained graph unpacks the copies
// twice, with the same gradients.
fn a_retained_graph_brings_the_copies_back_twice() {
    let (x, w) = inputs();
    let (loss, _, _) = checkpointed(&x, &w, Policy::OFFLOAD);
    backward_with(&loss, true).unwrap();
    let (gx, gw) = (x.grad().copy(), w.grad().copy());
    backward_with(&loss, false).unwrap();
    assert_bitwise(&x.grad(), &(&gx * 2), "x, accumulated over two backwards");
    assert_bitwise(&w.grad(), &(&gw * 2), "w, accumulated over two backwards");
}

#[test]
// docs/semantics.md, rules R4 and O1: nested in a `Save` body an `Offload`
// region is a plain call (the outer region keeps everything); a
// `Recompute` region inside an `Offload` body is refused as inside `Save`.
fn offload_nests_as_save() {
    let (x, _) = inputs();
    let (ex, _) = {
        let y = (x.exp() * 3).sin().sum(Kind::Float);
        (crate::common::grad_of(&x, &y), ())
    };
    let y = checkpoint("c").call(&x, |x| {
        let h = region("outer", Policy::Save).call(&x, |x| {
            region("inner", Policy::OFFLOAD).call(&x, |x| x.exp() * 3)
        });
        recompute_needs_tensor(&h);
        if !remat::is_recomputing() {
            let report = memory_report().unwrap();
            assert_eq!(report.regions.len(), 1, "{report}");
            assert_eq!(report.regions[0].offloaded_bytes(), 0, "{report}");
        }
        h.sin().sum(Kind::Float)
    });
    assert_bitwise(&crate::common::grad_of(&x, &y), &ex, "x");
    let err = checkpoint("c")
        .try_call(&x, |x| {
            region("outer", Policy::OFFLOAD).call(&x, |x| {
                region("inner", Policy::Recompute).call(&x, |x| x.exp())
            })
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a `recompute` region inside a `save` region never replays"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rules O1 and K2: an output a `Recompute` region asks
// for is offloaded with the saves and served from the copy on replay.
fn an_asked_for_output_is_served_from_its_copy() {
    let (x, _) = inputs();
    let plain = {
        let h = (&x * 2).relu();
        (h.sigmoid() * &h).sum(Kind::Float)
    };
    let expected = crate::common::grad_of(&x, &plain);
    let y = checkpoint("c").call(&x, |x| {
        // `relu` saves its result: the output shares the copy.
        let h = region("p", Policy::OFFLOAD).call(&x, |x| (x * 2).relu());
        if !remat::is_recomputing() {
            let report = memory_report().unwrap();
            assert_eq!(report.regions[0].offloaded_storages.len(), 1, "{report}");
        }
        region("q", Policy::Recompute).call(&h, |h| (h.sigmoid() * h).sum(Kind::Float))
    });
    assert_bitwise(&crate::common::grad_of(&x, &y), &expected, "x");
}

#[test]
// docs/semantics.md, rules O2 and S6: the user's saved-tensor hooks pack an
// `Offload` region's saves (they decide where saves go); parameters are
// never moved.
fn the_users_hooks_come_first_and_parameters_stay() {
    let (x, w) = inputs();
    let packed = Arc::new(AtomicUsize::new(0));
    let p = packed.clone();
    let hooks = TensorHooks::new(
        move |t: Tensor| {
            p.fetch_add(1, SeqCst);
            t
        },
        |t: &Tensor| t.shallow_clone(),
    );
    let w2 = w.shallow_clone();
    let y = checkpoint("c")
        .saved_tensors_hooks(hooks)
        .call(&x, move |x| {
            let h = region("p", Policy::OFFLOAD).call((&x, &w2), |(x, w)| x.matmul(w).exp());
            if !remat::is_recomputing() {
                let report = memory_report().unwrap();
                assert_eq!(report.regions[0].offloaded_bytes(), 0, "{report}");
            }
            recompute_needs_tensor(&h);
            h.sin().sum(Kind::Float)
        });
    assert!(packed.load(SeqCst) > 0);
    y.backward();

    let w2 = w.shallow_clone();
    let _y = checkpoint("c").call(&x, move |x| {
        // `w` is not a region input here: its save is a parameter's.
        let h = region("p", Policy::OFFLOAD).call(&x, |x| x.matmul(&w2).exp());
        let report = memory_report().unwrap();
        let r = &report.regions[0];
        // `matmul` saves `x` (rebuilt) and `w` (a parameter, kept where it
        // is, never moved); `exp` saves its result (moved).
        assert_eq!(r.parameters.len(), 1, "{report}");
        assert_eq!(r.offloaded_bytes(), 8 * 48 * 4, "{report}");
        h
    });
}
