//! The process-wide early-stop switch (`remat::Checkpoint::set_default_early_stop`) and
//! `REMAT_EARLY_STOP`: a test binary of its own, since both change every
//! checkpoint of the process (docs/semantics.md, rule C18).

use remat::autograd::is_placeholder;
use remat::{checkpoint, is_recomputing, Checkpoint};
use remat_reference::testing::{counter, input};
use std::sync::atomic::Ordering::SeqCst;
use tch::Kind;

/// How often the op after the closure's last save computed over a forward
/// and a backward: 1 when the replay stops early (it runs dry there), 2
/// when it does not.
fn tail_runs(ckpt: Checkpoint) -> usize {
    let tail = counter();
    let t = tail.clone();
    let x = input();
    let y = ckpt.call(&x, move |x| {
        let h = x.sin(); // the last save
        let out = &h * 2.0;
        if !is_placeholder(&out) {
            t.fetch_add(1, SeqCst);
        }
        assert!(is_recomputing() || !is_placeholder(&out));
        out
    });
    y.sum(Kind::Float).backward();
    tail.load(SeqCst)
}

#[test]
// docs/semantics.md, rule C18: the environment's default, the process-wide
// switch over it, and a checkpoint's own choice over both.
fn the_environment_and_the_global_switch_set_the_default_and_a_checkpoint_wins() {
    std::env::set_var("REMAT_EARLY_STOP", "off");
    assert!(!Checkpoint::default_early_stop(), "REMAT_EARLY_STOP=off");
    assert_eq!(tail_runs(checkpoint("env")), 2);
    assert_eq!(tail_runs(checkpoint("own").early_stop(true)), 1);
    // Read once: changing the variable later changes nothing.
    std::env::set_var("REMAT_EARLY_STOP", "1");
    assert!(!Checkpoint::default_early_stop());

    Checkpoint::set_default_early_stop(true);
    assert!(Checkpoint::default_early_stop());
    assert_eq!(tail_runs(checkpoint("global on")), 1);
    assert_eq!(tail_runs(checkpoint("own").early_stop(false)), 2);
    Checkpoint::set_default_early_stop(false);
    assert_eq!(tail_runs(checkpoint("global off")), 2);
    assert_eq!(tail_runs(checkpoint("own").early_stop(true)), 1);
}
