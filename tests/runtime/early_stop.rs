//! Early stop (docs/semantics.md, rules C17-C19): a recomputation ends once
//! every saved tensor the backward can still read is rebuilt, so the code
//! after the closure's last save runs once (on the forward), not again in
//! backward; `Checkpoint::early_stop(false)` runs the whole closure. The
//! process-wide switch and `REMAT_EARLY_STOP` are in `tests/early_stop_env.rs`
//! (a binary of their own: they change every checkpoint of the process).

use crate::common::{assert_bitwise, counter, input};
use remat::autograd::{backward_with, grad_enabled, is_placeholder, GradModeGuard};
use remat::diagnostics::dry_ops;
use remat::{
    autocast, checkpoint, is_recomputing, recompute_needs_tensor, region, AutocastGuard, Policy,
    RecomputeStateHook,
};
use remat_reference::model::{batch, block_body, Model, ModelPolicy, POLICIES, SMALL};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tch::{Device, Kind, Tensor};

/// `f(x)` without checkpoints, and `x`'s gradient of its sum.
fn plain(x: &Tensor, f: impl FnOnce(Tensor) -> Tensor) -> (Tensor, Tensor) {
    let x = x.detach().set_requires_grad(true);
    let y = f(x.shallow_clone());
    y.sum(Kind::Float).backward();
    (y.detach(), x.grad().copy())
}

/// Runs one op of the tail, and counts it if it computed (a stopped
/// recomputation returns a placeholder for it instead: rule C17).
fn tail_op(count: &AtomicUsize, op: impl FnOnce() -> Tensor) -> Tensor {
    let out = op();
    if !is_placeholder(&out) {
        count.fetch_add(1, SeqCst);
    }
    out
}

/// The closure of [`tail_counts`]: `sin` (which saves its input) is the
/// last save; three ops that save nothing follow it.
fn body_with_a_tail(x: Tensor, tail: &AtomicUsize) -> Tensor {
    let h = x.sin();
    let a = tail_op(tail, || &h * 2.0);
    let b = tail_op(tail, || &a + 1.0);
    tail_op(tail, || b.neg())
}

/// How often the tail's ops ran over a forward and a backward, and
/// whether the gradient is the plain model's, bit for bit.
fn tail_counts(early_stop: bool) -> usize {
    let x = input();
    let tail = counter();
    let t = tail.clone();
    let y = checkpoint("tail")
        .early_stop(early_stop)
        .call(&x, move |x| body_with_a_tail(x, &t));
    y.sum(Kind::Float).backward();
    let (y0, g0) = plain(&x, |x| body_with_a_tail(x, &AtomicUsize::new(0)));
    assert_bitwise(&y, &y0, "output");
    assert_bitwise(&x.grad(), &g0, "gradient");
    tail.load(SeqCst)
}

#[test]
// docs/semantics.md, rules C17 and C19: the ops after the last save run once.
fn the_ops_after_the_last_save_run_once_with_early_stop_and_twice_without() {
    assert_eq!(
        tail_counts(true),
        3,
        "early stop: the forward's three ops only"
    );
    assert_eq!(
        tail_counts(false),
        6,
        "no early stop: the replay runs them again"
    );
}

#[test]
// docs/semantics.md, rule C18: on by default (the stop unwinds nothing),
// off per checkpoint; strict recomputation runs the whole closure.
fn early_stop_is_on_unless_the_checkpoint_turns_it_off() {
    let x = input();
    let (tail, t) = (counter(), counter());
    let t2 = t.clone();
    let y = checkpoint("default").call(&x, move |x| body_with_a_tail(x, &t2));
    y.sum(Kind::Float).backward();
    assert_eq!(t.load(SeqCst), 3, "the default: the forward's ops only");
    let t2 = t.clone();
    t.store(0, SeqCst);
    let y = checkpoint("off")
        .early_stop(false)
        .call(&x, move |x| body_with_a_tail(x, &t2));
    y.sum(Kind::Float).backward();
    assert_eq!(
        t.load(SeqCst),
        6,
        "turned off: the replay runs the tail again"
    );
    // Strict recomputation runs the whole closure, even when asked to stop.
    let t = tail.clone();
    let y = checkpoint("strict")
        .strict_recompute(true)
        .early_stop(true)
        .call(&x, move |x| body_with_a_tail(x, &t));
    y.sum(Kind::Float).backward();
    assert_eq!(tail.load(SeqCst), 6);
}

/// The loss of the reference model with each block a checkpoint around
/// [`block_body`] under `policy`, early stop as given.
fn reference_loss(model: &Model, policy: ModelPolicy, early_stop: bool) -> Tensor {
    let (tokens, targets) = batch(SMALL, 3);
    model.loss_through(&tokens, &targets, |mut x| {
        for block in &model.blocks {
            let p = block.shallow();
            x = if policy == ModelPolicy::None {
                block_body(&p, &x, policy)
            } else {
                checkpoint(format!("layers.{}", p.index))
                    .early_stop(early_stop)
                    .call(&x, move |x| block_body(&p, &x, policy))
            };
        }
        x
    })
}

fn reference_gradients(model: &Model, policy: ModelPolicy, early_stop: bool) -> Vec<Tensor> {
    model.zero_grad();
    let loss = reference_loss(model, policy, early_stop);
    loss.backward();
    let mut out = vec![loss.detach()];
    out.extend(
        model
            .named_parameters()
            .iter()
            .map(|(_, p)| p.grad().copy()),
    );
    out
}

#[test]
// docs/semantics.md, rule C17: stopping changes when ops run, not gradients.
fn the_reference_model_has_bitwise_the_same_gradients_with_early_stop_on_and_off() {
    tch::set_num_threads(1);
    let model = Model::new(SMALL, 2);
    let plain = reference_gradients(&model, ModelPolicy::None, true);
    for policy in POLICIES.into_iter().filter(|&p| p != ModelPolicy::None) {
        for early_stop in [true, false] {
            let got = reference_gradients(&model, policy, early_stop);
            for (i, (g, g0)) in got.iter().zip(&plain).enumerate() {
                assert_bitwise(g, g0, &format!("{policy:?}, early stop {early_stop}, #{i}"));
            }
        }
    }
}

/// A state hook over a shared counter the closure bumps (a stand-in for a
/// generator's state).
struct Ticks(Arc<Mutex<i64>>);

impl RecomputeStateHook for Ticks {
    fn snapshot(&self) -> Box<dyn Any + Send> {
        Box::new(*self.0.lock().unwrap())
    }

    fn restore(&self, snapshot: &(dyn Any + Send)) {
        *self.0.lock().unwrap() = *snapshot.downcast_ref::<i64>().unwrap();
    }
}

#[test]
// docs/semantics.md, rules C17, H3 and S1: a `Save` region after the last
// bare save keeps its saves for itself, so the replay stops before it and
// the region, reached in the dry tail, does nothing (its output a dry
// placeholder, its body not run); the state hook's state is put back after
// the stopped replay.
fn a_save_region_after_the_last_bare_save_runs_dry_and_state_hooks_are_restored() {
    let body = |x: Tensor, ticks: &Mutex<i64>, tail: &AtomicUsize| {
        let h = x.sin(); // the last holder
        *ticks.lock().unwrap() += 1;
        // `exp` saves its output, which the region keeps (not a holder).
        let s = region("keep", Policy::Save).call(&h, |h| {
            tail.fetch_add(1, SeqCst);
            h.exp()
        });
        recompute_needs_tensor(&s);
        *ticks.lock().unwrap() += 10;
        tail_op(tail, || &s * 3.0)
    };
    for early_stop in [true, false] {
        let ticks = Arc::new(Mutex::new(0));
        let (tail, x) = (counter(), input());
        let (k, t) = (ticks.clone(), tail.clone());
        let y = checkpoint("state")
            .state_hook(Ticks(ticks.clone()))
            .early_stop(early_stop)
            .call(&x, move |x| body(x, &k, &t));
        assert_eq!(*ticks.lock().unwrap(), 11);
        *ticks.lock().unwrap() = 100; // what the rest of the step sees
        y.sum(Kind::Float).backward();
        // docs/semantics.md, rule H3: restored after the replay, stopped or not.
        assert_eq!(*ticks.lock().unwrap(), 100, "early stop {early_stop}");
        // The region's body runs on the forward only; the bare tail once
        // more without early stop.
        let expected = if early_stop { 2 } else { 3 };
        assert_eq!(tail.load(SeqCst), expected, "early stop {early_stop}");
        let (_, g0) = plain(&x, |x| body(x, &Mutex::new(0), &AtomicUsize::new(0)));
        assert_bitwise(
            &x.grad(),
            &g0,
            &format!("gradient, early stop {early_stop}"),
        );
    }
}

#[test]
// docs/semantics.md, rules C17 and S3: a `Save` region whose saves are its
// inputs, rebuilt on replay, is reached; the replay stops right after it.
fn a_save_region_rebuilding_its_inputs_is_reached_and_the_replay_stops_after_it() {
    let body = |x: Tensor, tail: &AtomicUsize| {
        let h = x.sin(); // the last holder
                         // `h * h` saves both operands: the region's input, rebuilt on replay.
        let r = region("square", Policy::Save).call(&h, |h| h * h);
        recompute_needs_tensor(&r);
        let a = tail_op(tail, || &r + 1.0);
        tail_op(tail, || &a * 0.5)
    };
    for early_stop in [true, false] {
        let (tail, x) = (counter(), input());
        let t = tail.clone();
        let y = checkpoint("rebuild")
            .early_stop(early_stop)
            .call(&x, move |x| body(x, &t));
        // Without the rebuild the backward would fail (E17).
        backward_with(&y.sum(Kind::Float), false).unwrap();
        let expected = if early_stop { 2 } else { 4 };
        assert_eq!(tail.load(SeqCst), expected, "early stop {early_stop}");
        let (_, g0) = plain(&x, |x| body(x, &AtomicUsize::new(0)));
        assert_bitwise(
            &x.grad(),
            &g0,
            &format!("gradient, early stop {early_stop}"),
        );
    }
}

#[test]
// docs/semantics.md, rules C15 and C17: an inner checkpoint's input is the
// outer one's last save, so the outer replay stops as it saves it and the
// inner closure then runs dry on placeholders of its inputs (its Rust code
// runs, its ops compute nothing); the inner checkpoint replays (and stops)
// on its own.
fn nested_checkpoints_stop_each_replay_on_its_own() {
    let body = |x: Tensor, inner: Arc<AtomicUsize>, tails: Arc<AtomicUsize>, early_stop: bool| {
        let h = x.sin();
        let i = checkpoint("inner")
            .early_stop(early_stop)
            .call(&h, move |h| {
                inner.fetch_add(1, SeqCst);
                let e = h.exp(); // the inner's last save (its output)
                tail_op(&tails, || &e * 2.0)
            });
        &i + 1.0
    };
    for early_stop in [true, false] {
        let (inner, tails, x) = (counter(), counter(), input());
        let (i, t) = (inner.clone(), tails.clone());
        let y = checkpoint("outer")
            .early_stop(early_stop)
            .call(&x, move |x| body(x, i.clone(), t.clone(), early_stop));
        y.sum(Kind::Float).backward();
        // Forward, the inner forward inside the outer replay (dry with
        // early stop), then the inner's own replay.
        assert_eq!(inner.load(SeqCst), 3, "inner runs, early stop {early_stop}");
        // The inner tail computed: on the forward only with early stop,
        // every run without.
        let tail_runs = if early_stop { 1 } else { 3 };
        assert_eq!(
            tails.load(SeqCst),
            tail_runs,
            "inner tails, early stop {early_stop}"
        );
        let (_, g0) = plain(&x, |x| body(x, counter(), counter(), early_stop));
        assert_bitwise(
            &x.grad(),
            &g0,
            &format!("gradient, early stop {early_stop}"),
        );
    }
}

#[test]
// docs/semantics.md, rules C12 and C17: what would fail in the stopped
// tail (a panic, an error of libtorch's) never runs, so it never surfaces;
// without early stop it is the backward's error as before.
fn a_failure_in_the_stopped_tail_never_surfaces() {
    type Tail = fn(&Tensor) -> Tensor;
    let failures: [(&str, Tail, &str); 2] = [
        ("panic", |_| panic!("the tail failed"), "the tail failed"),
        (
            "torch error",
            |h| h.view([-1, 7]),
            "invalid for input of size 4",
        ),
    ];
    for (name, fail, message) in failures {
        for early_stop in [true, false] {
            let x = input();
            let y = checkpoint("failing")
                .early_stop(early_stop)
                .call(&x, move |x| {
                    let h = x.sin();
                    if is_recomputing() {
                        let _ = fail(&h);
                    }
                    &h * 2.0
                });
            let result = backward_with(&y.sum(Kind::Float), false);
            if early_stop {
                result.unwrap_or_else(|e| panic!("{name}: the stopped tail surfaced: {e}"));
                let (_, g0) = plain(&x, |x| x.sin() * 2.0);
                assert_bitwise(&x.grad(), &g0, name);
            } else {
                let err = result.unwrap_err().to_string();
                assert!(
                    err.contains("checkpoint `failing`: replay failed") && err.contains(message),
                    "{name}: {err}"
                );
            }
        }
    }
}

#[test]
// docs/semantics.md, rules C12, C13 and C17: an error before the stop is
// still reported (here the metadata check, E9).
fn an_error_before_the_stop_is_still_reported() {
    let x = input();
    let y = checkpoint("shapes").early_stop(true).call(&x, |x| {
        let x = if is_recomputing() {
            x.repeat([2, 1])
        } else {
            x
        };
        let h = x.sin();
        h.sum(Kind::Float)
    });
    let err = backward_with(&y, false).unwrap_err().to_string();
    assert!(
        err.contains("checkpoint `shapes`") && err.contains("differs between forward and replay"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rule C17: a holder whose node autograd has freed
// (a result the closure dropped) is never read, so the replay does not
// run on to refill it.
fn a_save_whose_node_is_gone_is_not_waited_for() {
    let tail = counter();
    let t = tail.clone();
    let x = input();
    let y = checkpoint("dropped").early_stop(true).call(&x, move |x| {
        let h = x.sin();
        let out = tail_op(&t, || &h * 2.0);
        // `exp` saves its output, but nothing keeps this node alive.
        let _unused = h.exp();
        out
    });
    y.sum(Kind::Float).backward();
    assert_eq!(tail.load(SeqCst), 1);
    let (_, g0) = plain(&x, |x| x.sin() * 2.0);
    assert_bitwise(&x.grad(), &g0, "gradient");
}

#[test]
// docs/semantics.md, rules C8 and C17: under `retain_graph` every backward
// replays again, and each stops; a closure that saves nothing is not
// replayed at all.
fn every_backward_of_a_retained_graph_stops_and_a_closure_without_saves_never_replays() {
    let (runs, x) = (counter(), input());
    let r = runs.clone();
    let y = checkpoint("retained").early_stop(true).call(&x, move |x| {
        let h = x.sin();
        tail_op(&r, || &h * 2.0)
    });
    let loss = y.sum(Kind::Float);
    for _ in 0..3 {
        backward_with(&loss, true).unwrap();
    }
    assert_eq!(runs.load(SeqCst), 1);
    let (_, g0) = plain(&x, |x| x.sin() * 2.0);
    assert_bitwise(&x.grad(), &(g0 * 3.0), "three backwards' gradients");

    // `x * 2` saves no tensor: nothing needs the replay, with early stop on
    // or off (rule C7: torch never recomputes such a closure either).
    for early_stop in [true, false] {
        let (runs, x) = (counter(), input());
        let r = runs.clone();
        let y = checkpoint("no saves")
            .early_stop(early_stop)
            .call(&x, move |x| tail_op(&r, || &x * 2.0));
        y.sum(Kind::Float).backward();
        assert_eq!(runs.load(SeqCst), 1, "early stop {early_stop}");
        assert_bitwise(&x.grad(), &(x.ones_like() * 2.0), "gradient");
    }
}

#[test]
// docs/semantics.md, rules A1, A2, A4, C12 and C17: after a stopped replay
// the thread's grad mode, autocast state and frames are as before.
fn a_stopped_replay_leaves_the_threads_state_as_it_was() {
    let x = input();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let y = autocast(Device::Cpu, Kind::BFloat16, || {
        checkpoint("ambient").early_stop(true).call(&x, move |x| {
            s.lock().unwrap().push((
                is_recomputing(),
                grad_enabled(),
                AutocastGuard::current(Device::Cpu),
            ));
            let h = x.sin();
            h.matmul(&h.transpose(0, 1)) // saves both operands before it computes
        })
    });
    let loss = y.to_kind(Kind::Float).sum(Kind::Float);
    {
        let _off = GradModeGuard::new(false);
        backward_with(&loss, false).unwrap();
        assert!(!grad_enabled(), "grad mode is the caller's again");
    }
    assert!(!is_recomputing());
    assert_eq!(AutocastGuard::current(Device::Cpu), None);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(!seen[0].0 && seen[1].0, "forward, then the replay");
    assert!(seen[1].1, "the replay ran with grad on");
    assert_eq!(
        seen[0].2, seen[1].2,
        "the replay ran under the forward's autocast"
    );
    assert!(seen[1].2.is_some());
}

/// A layer behind a `std::sync::Mutex`, as tch users share a module
/// between closures, and a step that runs it in a checkpoint whose closure
/// holds the guard across every op (the stop, when there is one, lands
/// while it is held): the loss, the weight's gradient, and whether the
/// replay's tail computed nothing.
fn locked_step(
    layer: &Arc<Mutex<Tensor>>,
    x: &Tensor,
    early_stop: Option<bool>,
) -> (f64, Tensor, bool) {
    let shared = layer.clone();
    let dry = Arc::new(Mutex::new(false));
    let seen = dry.clone();
    let mut ckpt = checkpoint("locked");
    if let Some(on) = early_stop {
        ckpt = ckpt.early_stop(on);
    }
    let y = ckpt.call(x, move |x| {
        let w = shared.lock().expect("the layer's mutex is not poisoned");
        let h = x.matmul(&w).tanh(); // the last save
        let out = (&h * 2.0 + 1.0).neg(); // the tail, under the guard
        if is_recomputing() {
            *seen.lock().unwrap() = is_placeholder(&out);
        }
        out
    });
    let loss = y.sum(Kind::Float);
    backward_with(&loss, false).unwrap();
    let w = layer.lock().expect("the layer's mutex is not poisoned");
    let grad = w.grad().copy();
    let _ = w.grad().zero_();
    let dry = *dry.lock().unwrap();
    (f64::try_from(&loss).unwrap(), grad, dry)
}

#[test]
// docs/semantics.md, rules C17 and C18: early stop is on by default and
// unwinds nothing, so a closure holding a `Mutex` guard across the stop
// trains step after step, bitwise as without checkpoints, its replays'
// tails computing nothing, and the mutex is never poisoned.
fn a_closure_holding_a_mutex_guard_trains_for_several_steps_with_the_defaults() {
    assert!(
        remat::Checkpoint::default_early_stop(),
        "early stop is on by default (is REMAT_EARLY_STOP set?)"
    );
    let w = Tensor::from_slice(&[0.5f32, -0.25, 0.75, 1.0])
        .view([2, 2])
        .set_requires_grad(true);
    let layer = Arc::new(Mutex::new(w));
    let x = input().detach();
    for step in 0..4 {
        let (loss, grad, dry) = locked_step(&layer, &x, None);
        assert!(dry, "step {step}: the replay's tail computed");
        assert!(
            !layer.is_poisoned(),
            "step {step} poisoned the layer's mutex"
        );
        let w = layer.lock().unwrap();
        let w0 = w.detach().set_requires_grad(true);
        let loss0 = (x.matmul(&w0).tanh() * 2.0 + 1.0).neg().sum(Kind::Float);
        loss0.backward();
        assert_eq!(loss, f64::try_from(&loss0).unwrap(), "step {step}: loss");
        assert_bitwise(&grad, &w0.grad(), &format!("step {step}: gradient"));
        // An SGD step, so that every step trains a new weight.
        tch::no_grad(|| {
            let _ = w.shallow_clone().f_sub_(&(&grad * 0.1)).unwrap();
        });
    }
    let (_, _, dry) = locked_step(&layer, &x, Some(false));
    assert!(!dry, "early stop off: the replay's tail computes");
}

#[test]
// docs/semantics.md, rules C17 and C19: the stop ends no code of the
// closure, so state it updates in steps around its ops is never left
// between two of them, and its Rust code after the last save runs on every
// recomputation (only its ops compute nothing).
fn the_closure_runs_to_its_end_and_state_updated_in_steps_stays_whole() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let x = input();
    let y = checkpoint("steps").call(&x, move |x| {
        l.lock().unwrap().push("begin");
        let h = x.sin(); // the last save: the stop lands here on recomputation
        l.lock().unwrap().push("after the last save");
        let out = &h * 2.0;
        l.lock().unwrap().push("end");
        out
    });
    y.sum(Kind::Float).backward();
    let log = log.lock().unwrap();
    assert_eq!(
        *log,
        ["begin", "after the last save", "end"].repeat(2),
        "forward, then the whole recomputation"
    );
}

#[test]
// docs/semantics.md, rules C17 and C19 (E37): in the tail of a stopped
// recomputation, a tensor computed from the stopped op has a shape and no
// values; reading them fails with a message naming the checkpoint and the
// fix, and what the tail reads from before the stop reads as always.
fn reading_a_value_computed_after_the_stop_fails_and_names_the_fix() {
    let reads = Arc::new(Mutex::new(Vec::new()));
    let r = reads.clone();
    let x = input();
    let y = checkpoint("reads").call(&x, move |x| {
        let h = x.sin(); // the last save
        let out = &h * 2.0;
        if is_recomputing() {
            let before = x.sum(Kind::Float).f_double_value(&[]);
            let after = out.sum(Kind::Float).f_double_value(&[]);
            r.lock()
                .unwrap()
                .push((before.is_ok(), after.map_err(|e| e.to_string())));
        }
        out
    });
    y.sum(Kind::Float).backward();
    let (_, g0) = plain(&x, |x| x.sin() * 2.0);
    assert_bitwise(&x.grad(), &g0, "gradient");
    let reads = reads.lock().unwrap();
    let (before, after) = &reads[0];
    assert!(before, "a value from before the stop reads as always");
    let err = after.as_ref().unwrap_err();
    assert!(
        err.contains("checkpoint `reads`")
            && err.contains("computed after its recomputation stopped early")
            && err.contains(".early_stop(false)"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rules C17 and C19: after the stop, an op writing a
// value computed from the stopped op into a tensor from outside changes
// nothing; an op on values from before the stop still runs (here the
// second write).
fn a_tail_write_of_a_dry_value_changes_nothing_and_other_ops_run() {
    for early_stop in [true, false] {
        let (mut dry_buf, mut live_buf) = (
            Tensor::zeros([4], (Kind::Float, Device::Cpu)),
            Tensor::zeros([4], (Kind::Float, Device::Cpu)),
        );
        let (d, l) = (dry_buf.shallow_clone(), live_buf.shallow_clone());
        let x = input();
        let y = checkpoint("writes")
            .early_stop(early_stop)
            .call(&x, move |x| {
                let h = x.sin(); // the last save
                let out = &h * 2.0;
                tch::no_grad(|| {
                    d.shallow_clone().copy_(&out.view([-1]));
                    l.shallow_clone().copy_(&x.cos().view([-1]));
                });
                out
            });
        let _ = dry_buf.zero_();
        let _ = live_buf.zero_();
        y.sum(Kind::Float).backward();
        let x = x.detach().view([-1]);
        let expected = if early_stop {
            Tensor::zeros([4], (Kind::Float, Device::Cpu))
        } else {
            x.sin() * 2.0
        };
        assert_bitwise(
            &dry_buf,
            &expected,
            &format!("dry write, early stop {early_stop}"),
        );
        assert_bitwise(
            &live_buf,
            &x.cos(),
            &format!("live write, early stop {early_stop}"),
        );
    }
}

#[test]
// docs/semantics.md, rule C17 (E38): an op with no meta kernel (one whose
// result's shape depends on values, as `nonzero`'s) cannot run dry; the
// tail's call fails with a message naming the op and the fix.
fn an_op_without_a_meta_kernel_after_the_stop_names_itself() {
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let x = input();
    let y = checkpoint("nonzero").call(&x, move |x| {
        let out = x.sin() * 2.0;
        if is_recomputing() {
            *s.lock().unwrap() = Some(out.f_nonzero().map(|_| ()).map_err(|e| e.to_string()));
        }
        out
    });
    y.sum(Kind::Float).backward();
    let err = seen.lock().unwrap().take().unwrap().unwrap_err();
    assert!(
        err.contains("checkpoint `nonzero`")
            && err.contains("ran `aten::nonzero`")
            && err.contains("has no meta kernel")
            && err.contains(".early_stop(false)"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rules A2 and C17: under autocast, the tail's dry ops
// go through autocast's casts, so their placeholders have the dtypes the
// forward's results had.
fn under_autocast_a_dry_tail_has_the_forwards_dtypes() {
    let kinds = Arc::new(Mutex::new(Vec::new()));
    let k = kinds.clone();
    // Large enough that the stop ends the last matrix product, which then
    // runs dry through autocast's casts.
    let x = Tensor::linspace(-1.0, 1.0, 1 << 16, (Kind::Float, Device::Cpu))
        .view([256, 256])
        .set_requires_grad(true);
    let w = Tensor::linspace(0.5, -0.5, 1 << 16, (Kind::Float, Device::Cpu)).view([256, 256]);
    let y = autocast(Device::Cpu, Kind::BFloat16, || {
        checkpoint("autocast").call(&x, move |x| {
            let h = x.tanh(); // the last save (its output)
            let m = h.matmul(&w); // autocast: bf16
            let out = (&m + 1.0).matmul(&w); // bf16 again
            k.lock()
                .unwrap()
                .push((is_placeholder(&out), m.kind(), out.kind()));
            out
        })
    });
    y.to_kind(Kind::Float).sum(Kind::Float).backward();
    let kinds = kinds.lock().unwrap();
    assert_eq!(
        *kinds,
        [
            (false, Kind::BFloat16, Kind::BFloat16),
            (true, Kind::BFloat16, Kind::BFloat16)
        ]
    );
}

#[test]
// docs/semantics.md, rules C17 and C19: in the reference model written
// with the macros, each block's recomputation runs the residual add after
// its last save dry (`needs m` in the tail marks a dry output without
// failing, so the add is reached). The small config's last matrix product
// saves 16,384 elements, too few to be worth ending, so it computes (the
// medium model's, 2,097,152, runs dry: docs/performance.md, section 5);
// under `save_mlp` the `mlp` region rebuilds the last saves.
fn the_reference_blocks_run_their_tail_dry_through_needs() {
    let model = Model::new(SMALL, 0);
    let (tokens, targets) = batch(SMALL, 1);
    let blocks = SMALL.l as usize;
    for policy in [
        ModelPolicy::Full,
        ModelPolicy::Selective,
        ModelPolicy::SaveMlp,
    ] {
        let tail = ["aten::add.Tensor"];
        let loss = model.loss(&tokens, &targets, policy);
        let ((), dry) = dry_ops(|| loss.backward());
        assert_eq!(dry, tail.repeat(blocks), "{policy:?}");
    }
}

#[test]
// docs/semantics.md, rule C17: the op whose save completes the rebuild
// computes nothing when it saves at least `ENDS_OP_FROM` elements; a
// smaller one computes (ending it would cost more than it saves), and
// what follows from its results runs dry either way.
fn the_stopping_op_ends_only_when_it_is_large() {
    for (n, dry) in [
        (1 << 16, &["aten::sin", "aten::mul.Scalar"][..]),
        ((1 << 16) - 1, &["aten::mul.Scalar"][..]),
    ] {
        let x = Tensor::linspace(-1.0, 1.0, n, (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let y = checkpoint("sizes").call(&x, |x| x.sin() * 2.0); // `sin` saves `x`
        let ((), ran) = dry_ops(|| y.sum(Kind::Float).backward());
        assert_eq!(ran, dry, "{n} elements");
        let (_, g0) = plain(&x, |x| x.sin() * 2.0);
        assert_bitwise(&x.grad(), &g0, &format!("gradient, {n} elements"));
    }
}

#[test]
// docs/semantics.md, rule C17: the op the stop is raised in has live
// arguments; when it has no meta kernel (`masked_select`, whose result's
// shape depends on the mask's values) it runs for real instead of dry, so
// the tail goes on with a live tensor rather than failing.
fn a_stopped_op_without_a_meta_kernel_runs_for_real() {
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    // Large enough that the stop ends the op (`ENDS_OP_FROM` elements).
    let x =
        Tensor::linspace(-1.0, 1.0, 1 << 16, (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let mask = x.detach().gt(0.0);
    let m = mask.shallow_clone();
    let y = checkpoint("masked").call(&x, move |x| {
        let picked = x.masked_select(&m); // saves `x`: the last save
        let out = &picked * 2.0;
        if is_recomputing() {
            *s.lock().unwrap() = Some(is_placeholder(&out));
        }
        out
    });
    y.sum(Kind::Float).backward();
    assert_eq!(
        *seen.lock().unwrap(),
        Some(false),
        "the tail ran on a live tensor"
    );
    let (_, g0) = plain(&x, |x| x.masked_select(&mask) * 2.0);
    assert_bitwise(&x.grad(), &g0, "gradient");
}

#[test]
// docs/semantics.md, rule C17: the stop's fallback runs the ops of a
// recomputation only from the save before the last op's saves on (the
// forward counted how many saves an op makes), and still ends the
// stopping op: here `exp`, after `sin` and `cos` ran without it.
fn the_fallback_armed_for_the_last_ops_still_ends_the_stopping_op() {
    let x =
        Tensor::linspace(-1.0, 1.0, 1 << 16, (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let body = |x: Tensor| x.sin().cos().exp() * 2.0; // each saves one tensor
    let y = checkpoint("late").call(&x, body);
    let ((), dry) = dry_ops(|| y.sum(Kind::Float).backward());
    assert_eq!(dry, ["aten::exp", "aten::mul.Scalar"]);
    let (_, g0) = plain(&x, body);
    assert_bitwise(&x.grad(), &g0, "gradient");
}
