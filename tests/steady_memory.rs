//! Nothing leaks over many steps: 1000 forwards of the reference model
//! dropped without backward, then 1000 with backward, leave no live
//! checkpoint and the process's resident memory flat. A test binary of its
//! own: it reads process-wide counters.

use remat::diagnostics::live_checkpoints;
use remat_reference::measure::resident_bytes;
use remat_reference::model::{batch, Model, ModelPolicy, SMALL};

/// Resident set size in KiB (Linux), the unit /proc counts in.
fn rss_kib() -> i64 {
    resident_bytes().expect("VmRSS in /proc/self/status") as i64 / 1024
}

/// The growth that counts as flat: allocator noise, not a leak (a leaked
/// graph of this model is ~1 MiB per step: 1000 steps would be ~1 GiB).
const TOLERANCE_KIB: i64 = 16 * 1024;

#[test]
// docs/semantics.md, rule M3.
fn a_thousand_steps_with_and_without_backward_leave_nothing_behind() {
    tch::set_num_threads(1);
    let model = Model::new(SMALL, 4);
    let (tokens, targets) = batch(SMALL, 5);
    let policy = ModelPolicy::Selective;
    let before = live_checkpoints();
    // Warm up allocator pools and libtorch's one-time state.
    for _ in 0..50 {
        model.loss(&tokens, &targets, policy).backward();
    }
    let start = rss_kib();
    for _ in 0..1000 {
        let loss = model.loss(&tokens, &targets, policy);
        assert!(live_checkpoints() > before);
        drop(loss);
    }
    assert_eq!(live_checkpoints(), before, "a dropped forward keeps state");
    let middle = rss_kib();
    for _ in 0..1000 {
        model.zero_grad();
        model.loss(&tokens, &targets, policy).backward();
    }
    assert_eq!(live_checkpoints(), before, "a backward keeps state");
    let end = rss_kib();
    println!("resident memory: {start} KiB, {middle} KiB after 1000 dropped forwards, {end} KiB after 1000 steps");
    assert!(
        middle - start < TOLERANCE_KIB,
        "grew {} KiB",
        middle - start
    );
    assert!(end - start < TOLERANCE_KIB, "grew {} KiB", end - start);
}
