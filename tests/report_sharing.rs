//! The whole-model report bills a storage kept by two regions (and by two
//! checkpoints) once. A test binary of its own: the report reads every live
//! checkpoint of the process.

use remat_reference::testing as common;

use common::input;
use remat::{
    checkpoint, diagnostics::memory_report, diagnostics::saved_tensors_report, is_recomputing,
    recompute_needs_tensor, region, Policy,
};
use tch::{Kind, Tensor};

/// `exp` keeps its result `e` (2x2 f32: 16 B); `sin`, a second `Save`
/// region, saves `e` again (it cannot be rebuilt: its producer does not
/// replay) and keeps its own output for the bare read: two regions keep
/// `e`'s one storage.
fn shared(x: Tensor) -> Tensor {
    let e = region("exp", Policy::Save).call(&x, |x| x.exp());
    let s = region("sin", Policy::Save).call(&e, |e| e.sin());
    recompute_needs_tensor(&s);
    if !is_recomputing() {
        let report = memory_report().unwrap();
        let per_region: Vec<i64> = report.regions.iter().map(|r| r.bytes()).collect();
        // Each region's own view counts `e`: 16 + (16 + 16)...
        assert_eq!(per_region, [16, 32], "{report}");
        // ...the checkpoint's total counts it once.
        assert_eq!(report.total_bytes(), 32, "{report}");
    }
    s.sum(Kind::Float)
}

#[test]
// docs/semantics.md, rule D4.
fn a_storage_kept_by_two_regions_is_billed_once() {
    let x = input();
    let y = checkpoint("one").call(&x, shared);
    let report = saved_tensors_report(None);
    let one = &report.checkpoints[0];
    let (exp, sin) = (&one.regions[0], &one.regions[1]);
    // `exp` keeps `e` (16 B, also its output); `sin` keeps `e` too, billed
    // to `exp`, and its own result (16 B).
    assert_eq!(exp.bytes(), 16, "{report}");
    assert_eq!(sin.bytes(), 16, "{report}");
    assert_eq!(report.checkpoint_bytes(), 32, "{report}");
    y.backward();
}
