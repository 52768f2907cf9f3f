//! What `Save` regions keep, through `memory_report`.

use crate::common::assert_bitwise;
use remat::{
    checkpoint, diagnostics::memory_report, diagnostics::MemoryReport, recompute_needs_tensor,
    region, storage::storage_key, storage::storage_nbytes, storage::StorageKey, Policy,
    TensorHooks,
};
use remat_reference::model::{block_body, Model, ModelPolicy, SMALL};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tch::{Device, Kind, Tensor};

/// Runs `body` in a checkpoint and returns the report taken at its end.
fn report_of(
    x: &Tensor,
    body: impl Fn(Tensor) -> Tensor + Send + 'static,
) -> (Tensor, MemoryReport) {
    let report = Arc::new(Mutex::new(None));
    let r = report.clone();
    let y = checkpoint("c").call(x, move |x| {
        let y = body(x);
        if !remat::is_recomputing() {
            *r.lock().unwrap() = Some(memory_report().unwrap());
        }
        y
    });
    let report = report.lock().unwrap().take().unwrap();
    (y, report)
}

#[test]
// docs/semantics.md, rules S3 and D3.
fn saved_inputs_are_rebuilt_not_kept() {
    let x = Tensor::randn([2, 3, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let w = Tensor::randn([5, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let w2 = w.shallow_clone();
    let (y, report) = report_of(&x, move |x| {
        let h = x.tanh();
        // sin saves its input; linear on a 3-D input saves a 2-D view of it.
        let a = region("sin", Policy::Save).call(&h, |h| h.sin());
        let b = region("lin", Policy::Save).call((&h, &w2), |(h, w)| h.linear::<Tensor>(w, None));
        recompute_needs_tensor(&a);
        recompute_needs_tensor(&b);
        a.sum(Kind::Float) + b.sum(Kind::Float)
    });
    let sin = &report.regions[0];
    assert_eq!(sin.rebuilt, ["saved.0"]);
    assert_eq!(sin.storages().count(), 1, "only its kept output: {report}");
    assert!(sin.storages().all(|s| s.names == ["output.0"]));
    let lin = &report.regions[1];
    assert!(!lin.rebuilt.is_empty(), "{report}");
    assert!(
        lin.storages()
            .all(|s| !s.names.iter().any(|n| n.starts_with("saved."))),
        "{report}"
    );
    assert!(
        report
            .to_string()
            .contains("rebuilt on replay, not kept: saved.0"),
        "{report}"
    );
    y.backward();
}

#[test]
// docs/semantics.md, rule S4.
fn an_input_mutated_in_place_by_the_body_is_kept_and_gradients_stay_exact() {
    let run = |ckpt: bool| {
        let x = Tensor::from_slice(&[0.5f32, -0.25, 1.0]).set_requires_grad(true);
        let body = |x: &Tensor| {
            let h = x * 1.0;
            region("bump", Policy::Save).call(&h, |h| {
                let mut h = h.shallow_clone();
                let _ = h.g_add_(&Tensor::ones([3], tch::kind::FLOAT_CPU));
                h.sin()
            })
        };
        let (y, report) = if ckpt {
            let (y, r) = report_of(&x, move |x| {
                let a = body(&x);
                recompute_needs_tensor(&a);
                a
            });
            (y, Some(r))
        } else {
            (body(&x), None)
        };
        y.sum(Kind::Float).backward();
        (x.grad(), report)
    };
    let (g, report) = run(true);
    let report = report.unwrap();
    let bump = &report.regions[0];
    assert!(bump.rebuilt.is_empty(), "{report}");
    assert!(
        bump.storages()
            .any(|s| s.names.contains(&"saved.0".to_string())),
        "{report}"
    );
    assert_bitwise(&g, &run(false).0, "gradient");
}

/// Bytes that plain autograd keeps for `f`, each storage once.
fn plain_saved_bytes(f: impl FnOnce() -> Tensor) -> (Tensor, i64) {
    let seen: Arc<Mutex<HashMap<StorageKey, i64>>> = Arc::default();
    let s = seen.clone();
    let hooks = TensorHooks::new(
        move |t: Tensor| {
            if let Some(k) = storage_key(&t) {
                s.lock().unwrap().insert(k, storage_nbytes(&t));
            }
            t
        },
        |t: &Tensor| t.shallow_clone(),
    );
    let y = {
        let _g = hooks.push();
        f()
    };
    let total = seen.lock().unwrap().values().sum();
    (y, total)
}

#[test]
// docs/semantics.md, rule M5.
fn a_selective_block_keeps_less_than_a_plain_one_and_only_attention() {
    let model = Model::new(SMALL, 11);
    let block = model.blocks[0].shallow();
    let x = Tensor::randn([SMALL.b, SMALL.t, SMALL.d], (Kind::Float, Device::Cpu))
        .set_requires_grad(true);
    let (_, plain) = plain_saved_bytes(|| block_body(&block, &x, ModelPolicy::None));
    let (y, report) = report_of(&x, move |x| block_body(&block, &x, ModelPolicy::Selective));
    assert_eq!(
        report.regions.len(),
        1,
        "only attention is a Save region: {report}"
    );
    assert_eq!(report.regions[0].region, "c::attention");
    let input_bytes = storage_nbytes(&x);
    let kept = report.total_bytes() + input_bytes;
    assert!(report.total_bytes() > 0);
    assert!(
        kept < plain,
        "selective keeps {kept} B, plain {plain} B\n{report}"
    );
    println!("plain block keeps {plain} B; selective keeps {kept} B\n{report}");
    y.sum(Kind::Float).backward();
}

/// The Python reference (torch_remat 0.2.0 on the same libtorch, the same
/// block and annotations, small config) reports for one block:
/// selective: `c::attention: 177.00 KiB` in 9 storages, 1 save rebuilt;
/// save_mlp: `c::mlp: 272.00 KiB` in 5 storages, 1 save rebuilt.
/// The reference bills the weights its ops save (`w.t()` of each linear);
/// remat shows them apart, as parameters: two weights per region, 64 KiB
/// (attention: 64x192 and 64x64 f32) and 128 KiB (mlp: 64x256 and 256x64).
#[test]
// docs/semantics.md, rule M5 (and docs/reference-model.md).
fn bytes_kept_per_region_equal_the_python_reference() {
    let model = Model::new(SMALL, 11);
    for (policy, region, bytes, storages, weights) in [
        (
            ModelPolicy::Selective,
            "c::attention",
            177 * 1024,
            9,
            64 * 1024,
        ),
        (ModelPolicy::SaveMlp, "c::mlp", 272 * 1024, 5, 128 * 1024),
    ] {
        let block = model.blocks[0].shallow();
        let x = Tensor::randn([SMALL.b, SMALL.t, SMALL.d], (Kind::Float, Device::Cpu))
            .set_requires_grad(true);
        let (y, report) = report_of(&x, move |x| block_body(&block, &x, policy));
        assert_eq!(report.regions.len(), 1, "{report}");
        let r = &report.regions[0];
        assert_eq!(r.region, region);
        let params: i64 = r.parameters.iter().map(|p| p.bytes).sum();
        assert_eq!(
            (report.total_bytes(), report.storage_count()),
            (bytes - weights, storages - 2),
            "{report}"
        );
        assert_eq!((params, r.parameters.len()), (weights, 2), "{report}");
        assert_eq!(r.rebuilt.len(), 1, "{report}");
        y.sum(Kind::Float).backward();
    }
}

/// The report text of one reference block under each policy, reviewed as a
/// snapshot (a change to what is kept, or to the format, shows up in review).
#[test]
// docs/semantics.md, rule D3.
fn memory_report_snapshots_of_the_reference_block() {
    let model = Model::new(SMALL, 11);
    for (policy, name) in [
        (ModelPolicy::Full, "full"),
        (ModelPolicy::Selective, "selective"),
        (ModelPolicy::SaveMlp, "save_mlp"),
    ] {
        let block = model.blocks[0].shallow();
        let x = Tensor::randn([SMALL.b, SMALL.t, SMALL.d], (Kind::Float, Device::Cpu))
            .set_requires_grad(true);
        let (y, mut report) = report_of(&x, move |x| block_body(&block, &x, policy));
        // The call site's line moves with unrelated edits of the model: keep the file.
        for r in &mut report.regions {
            r.location = r
                .location
                .rsplit_once(':')
                .map_or(r.location.clone(), |(f, _)| f.to_string());
        }
        insta::assert_snapshot!(format!("memory_report_{name}"), report.to_string());
        y.sum(Kind::Float).backward();
    }
}

/// A `Save` region packs its saves through the checkpoint's own hook when
/// that hook is on top; under a tracker pushed inside the checkpoint it must
/// still keep them itself (as when every region pushed its own hook level).
#[test]
// docs/semantics.md, rule S1.
fn a_save_region_under_a_tracker_pushed_inside_the_checkpoint_keeps_its_saves() {
    let x = Tensor::randn([4, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let tracked = Arc::new(Mutex::new(None));
    let t = tracked.clone();
    let (y, report) = report_of(&x, move |x| {
        let h = x.tanh();
        // `exp` saves its result: a kept save of the region.
        let (e, outside) = remat::diagnostics::track_saved_tensors(|| {
            region("exp", Policy::Save).call(&h, |h| h.exp())
        });
        if !remat::is_recomputing() {
            *t.lock().unwrap() =
                remat::diagnostics::saved_tensors_report(Some(&outside)).outside_bytes();
        }
        recompute_needs_tensor(&e);
        e.sum(Kind::Float)
    });
    assert_eq!(
        *tracked.lock().unwrap(),
        Some(0),
        "the region's saves went to the tracker: {report}"
    );
    let exp = &report.regions[0];
    assert!(
        exp.storages()
            .any(|s| s.names.iter().any(|n| n.starts_with("saved."))),
        "{report}"
    );
    y.backward();
    let expected = x.tanh().exp() * (x.tanh().square().neg() + 1.0);
    assert!(x.grad().allclose(&expected, 1e-6, 1e-6, false));
}
