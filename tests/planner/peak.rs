//! `diagnostics::backward_heap_peak`, the independent measure of the peak
//! during backward that the planner's predicted peak is checked against
//! (`examples/peak.rs` prints the sweep).

use crate::serial;
use remat::checkpoint;
use remat::diagnostics::{backward_heap_peak, heap_bytes_in_use};
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
