//! The planner's predictions against glibc's heap, a measure independent
//! of remat's records: the kept bytes at every budget, and
//! `diagnostics::backward_heap_peak`, the measure of the peak during
//! backward (`examples/peak.rs` prints the predicted peak against it).

use crate::{serial, Planned, Setup};
use remat::checkpoint;
use remat::diagnostics::{backward_heap_peak, heap_bytes_in_use};
use remat::planner::Plan;
use remat_reference::model::{ModelPolicy, MEDIUM};
use tch::{kind::FLOAT_CPU, Kind, Tensor};

/// Two intermediates of 1 MiB saved, the third op's output summed.
fn chain(x: &Tensor) -> Tensor {
    x.sin().sin().sin().sum(Kind::Float)
}

/// What a replay rebuilds is alive only inside the backward, so only a
/// measure taken while the backward runs sees it: with the node hooks, the
/// peak over the forward's level is at least the two intermediates the
/// replay of `sin(sin(sin(x)))` rebuilds.
#[test]
fn the_backward_peak_sees_what_a_replay_rebuilds() {
    let _serial = serial();
    const MIB: i64 = 1 << 20;
    let x = Tensor::ones([512, 512], FLOAT_CPU).set_requires_grad(true); // 1 MiB
                                                                         // x.grad exists before the measured step (zero_grad keeps it).
    checkpoint("warm").call(&x, |x| chain(&x)).backward();
    let run = |checkpointed: bool| {
        let _ = x.grad().zero_();
        let before = heap_bytes_in_use()? as i64;
        let loss = if checkpointed {
            checkpoint("chain").call(&x, |x| chain(&x))
        } else {
            chain(&x)
        };
        let forward = heap_bytes_in_use()? as i64 - before;
        let peak = backward_heap_peak(&loss).unwrap()? as i64 - before;
        Some((forward, peak))
    };
    let Some((forward, peak)) = run(true) else {
        return; // not glibc: the heap does not report its bytes
    };
    assert!(forward < MIB / 4, "the checkpoint kept {forward} bytes");
    assert!(
        peak >= 2 * MIB,
        "peak during backward {peak}: the replay's values unseen"
    );
    let (plain_forward, plain_peak) = run(false).unwrap();
    assert!(
        plain_forward >= 2 * MIB,
        "without the checkpoint the forward keeps {plain_forward}"
    );
    assert!(plain_peak >= plain_forward);
}

/// The planner's predicted kept bytes against an independent measure:
/// glibc's heap grows over the forward by what the plan keeps plus the
/// graph itself (nodes, the loss), a small fixed overhead, at every budget
/// of a sweep from the least to `none`'s bytes (docs/planner.md, "What is
/// measured").
#[test]
fn predicted_kept_bytes_are_the_heaps_growth_over_the_forward_at_every_budget() {
    let _serial = serial();
    const OVERHEAD: i64 = 1 << 20;
    let s = Setup::new(MEDIUM);
    let profile = s.profile();
    // Gradients exist before the measured forwards: zero_grad keeps them.
    s.loss(ModelPolicy::None).backward();
    let least = Plan::minimum(&profile).predicted.kept_bytes;
    let most = s.measure(ModelPolicy::None);
    for step in 0..=8 {
        let plan = Plan::for_budget(&profile, least + (most - least) * step / 8).unwrap();
        s.model.zero_grad();
        let Some(before) = heap_bytes_in_use() else {
            return; // not glibc: the heap does not report its bytes
        };
        let loss = plan.scope(|| s.loss(ModelPolicy::Auto));
        let grown = heap_bytes_in_use().unwrap() as i64 - before as i64;
        drop(loss);
        let over = grown - plan.predicted.kept_bytes;
        assert!(
            (0..OVERHEAD).contains(&over),
            "the heap grew by {grown} bytes over the forward, the plan predicts {} kept \
             (difference {over}, expected 0 to {OVERHEAD})\n{plan}",
            plan.predicted.kept_bytes
        );
    }
}
