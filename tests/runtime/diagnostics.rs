//! Diagnostics that conform to the rules: thread state after failures, save names,
//! views in reports, the capture callback, parameters, released outputs,
//! trace metadata and the per-checkpoint report's inputs.

use crate::common::{assert_bitwise, input};
use remat::{
    autograd::apply, autograd::backward_with, autograd::grad_enabled, autograd::try_apply,
    autograd::BackwardContext, autograd::ForwardContext, autograd::Function,
    autograd::GradModeGuard, checkpoint, current_saved_tensor_info, diagnostics::collect_trace,
    diagnostics::memory_report, diagnostics::trace_scope, diagnostics::trace_scope_with,
    diagnostics::MemoryReport, is_recomputing, recompute_needs_tensor, region,
    storage::storage_nbytes, storage::WeakStorage, Policy, Result, RngStateHook, SavedTensorKind,
    TensorHooks,
};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tch::{Device, Kind, Tensor};

// ---------------------------------------------------------------------------
// Fix 1: every failure leaves the thread as it was.

/// What a failure must not change on this thread.
#[derive(Debug, PartialEq)]
struct ThreadState {
    grad: bool,
    recomputing: bool,
    in_checkpoint: bool,
    pack_info: bool,
}

/// (The RNG is process-wide, not per thread: tests/rng.rs checks that a
/// failed replay restores it.)
fn thread_state() -> ThreadState {
    ThreadState {
        grad: grad_enabled(),
        recomputing: is_recomputing(),
        in_checkpoint: memory_report().is_ok(),
        pack_info: current_saved_tensor_info().is_some(),
    }
}

/// After a failure: no hook of remat is left on the stack (a plain forward
/// and backward give exact gradients and nothing packs them), a checkpoint
/// still records a graph, and a trace records again.
fn assert_thread_clean(before: &ThreadState) {
    assert_eq!(&thread_state(), before);
    let packed = Arc::new(AtomicUsize::new(0));
    let count = packed.clone();
    let x = input();
    let plain = x.exp().sin().sum(Kind::Float);
    plain.backward();
    let expected = x.grad().copy();
    let _ = x.grad().zero_();
    let probe = TensorHooks::new(
        move |t: Tensor| {
            count.fetch_add(1, SeqCst);
            t
        },
        |t: &Tensor| t.shallow_clone(),
    );
    let y = {
        let _scope = probe.push();
        checkpoint("after").call(&x, |x| {
            region("exp", Policy::Save).call(&x, |x| x.exp().sin())
        })
    };
    assert!(y.requires_grad(), "the next checkpoint records a graph");
    y.sum(Kind::Float).backward();
    assert_bitwise(&x.grad(), &expected, "gradients after the failure");
    assert!(packed.load(SeqCst) > 0, "the user's pair is on top again");
    let (_, trace) = collect_trace(|| trace_scope("s", || ()));
    assert_eq!(trace.to_string(), "remat trace\n  s\n");
}

/// `exp` whose forward panics (or fails) inside `Save` regions.
struct Failing {
    panic: bool,
}

impl Function for Failing {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let y = inputs[0].exp();
        ctx.save_for_backward([("y", &y)]);
        if self.panic {
            panic!("forward exploded");
        }
        Err(remat::Error::Function {
            function: "Failing".into(),
            message: "forward failed".into(),
        })
    }

    fn backward(&mut self, _: &BackwardContext<'_>, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g[0].shallow_clone())])
    }
}

#[test]
// docs/semantics.md, rule C11.
fn a_function_panicking_in_a_save_region_leaves_grad_mode_on() {
    let before = thread_state();
    assert!(before.grad);
    let x = input();
    let err = checkpoint("c")
        .try_call(&x, |x| {
            region("f", Policy::Save).call(&x, |x| apply(Failing { panic: true }, &[x]).remove(0))
        })
        .unwrap_err();
    assert!(err.to_string().contains("forward exploded"), "{err}");
    assert_thread_clean(&before);
}

#[test]
// docs/semantics.md, rule C11.
fn a_function_failing_in_a_save_region_leaves_the_thread_as_it_was() {
    let before = thread_state();
    let x = input();
    let err = checkpoint("c")
        .try_call(&x, |x| {
            region("f", Policy::Save).call(&x, |x| {
                try_apply(Failing { panic: false }, &[x])
                    .unwrap_or_else(|e| panic!("{e}"))
                    .remove(0)
            })
        })
        .unwrap_err();
    assert!(err.to_string().contains("forward failed"), "{err}");
    assert_thread_clean(&before);
    // Also outside any checkpoint, and with grad mode off to begin with.
    let _off = GradModeGuard::new(false);
    let before = thread_state();
    assert!(try_apply(Failing { panic: false }, &[&x]).is_err());
    assert_eq!(thread_state(), before);
}

#[test]
// docs/semantics.md, rule C11.
fn a_panic_in_a_recompute_region_on_the_forward_leaves_the_thread_as_it_was() {
    let before = thread_state();
    let x = input();
    let err = checkpoint("c")
        .state_hook(RngStateHook::cpu())
        .try_call(&x, |x| {
            region("r", Policy::Recompute).call(&x, |_x| -> Tensor { panic!("body exploded") })
        })
        .unwrap_err();
    assert!(err.to_string().contains("body exploded"), "{err}");
    assert_thread_clean(&before);
}

#[test]
// docs/semantics.md, rules C12 and A1.
fn a_replay_that_fails_in_backward_leaves_the_thread_as_it_was() {
    let x = input();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let y = checkpoint("c")
        .state_hook(RngStateHook::cpu())
        .call(&x, move |x| {
            region("r", Policy::Recompute).call(&x, |x| {
                if seen.fetch_add(1, SeqCst) == 1 {
                    panic!("replay exploded");
                }
                x.exp().sin()
            })
        });
    let loss = y.sum(Kind::Float);
    // Backward under no_grad: replay turns grad mode on for itself only.
    let _off = GradModeGuard::new(false);
    let before = thread_state();
    let err = backward_with(&loss, false).unwrap_err();
    assert!(err.to_string().contains("replay exploded"), "{err}");
    assert_eq!(calls.load(SeqCst), 2, "the replay ran");
    assert_eq!(thread_state(), before);
    drop(_off);
    assert_thread_clean(&thread_state());
}

/// Square whose backward panics.
struct BadBackward;

impl Function for BadBackward {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        ctx.save_for_backward([("x", inputs[0])]);
        Ok(vec![inputs[0] * inputs[0]])
    }

    fn backward(&mut self, _: &BackwardContext<'_>, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        panic!("backward exploded")
    }
}

#[test]
// docs/semantics.md, rule C12.
fn a_backward_that_fails_inside_a_save_region_leaves_the_thread_as_it_was() {
    let x = input();
    let y = checkpoint("c").call(&x, |x| {
        let h = region("sq", Policy::Save).call(&x, |x| apply(BadBackward, &[x]).remove(0));
        recompute_needs_tensor(&h);
        h.sin()
    });
    let before = thread_state();
    let err = backward_with(&y.sum(Kind::Float), false).unwrap_err();
    assert!(err.to_string().contains("backward exploded"), "{err}");
    assert_thread_clean(&before);
}

// ---------------------------------------------------------------------------
// Fix 2: names given to save_for_backward.

/// `a * b` saving both under names, and an empty slot between them.
struct NamedMul {
    names: [&'static str; 2],
}

impl Function for NamedMul {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (a, b) = (inputs[0].exp(), inputs[1].exp());
        let none = Tensor::new();
        ctx.save_for_backward([(self.names[0], &a), ("nothing", &none), (self.names[1], &b)]);
        Ok(vec![&a * &b])
    }

    fn backward(&mut self, ctx: &BackwardContext<'_>, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let saved = ctx.saved_tensors()?;
        assert_eq!(saved.len(), 3, "named saves keep their positions");
        assert!(!saved[1].defined(), "the empty slot comes back empty");
        let (a, b) = (ctx.saved(self.names[0])?, ctx.saved(self.names[1])?);
        assert!(saved[0].equal(&a) && saved[2].equal(&b));
        Ok(vec![Some(&g[0] * &b * &a), Some(&g[0] * &a * &b)])
    }
}

#[test]
// docs/semantics.md, rule D2.
fn save_names_reach_the_memory_report_and_an_empty_slot_round_trips() {
    let x = Tensor::randn([4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let z = Tensor::randn([4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let report = Arc::new(Mutex::new(None));
    let r = report.clone();
    let y = checkpoint("c").call((&x, &z), move |(x, z)| {
        let out = region("mul", Policy::Save).call((&x, &z), |(x, z)| {
            apply(
                NamedMul {
                    names: ["lhs", "rhs"],
                },
                &[x, z],
            )
            .remove(0)
        });
        if !is_recomputing() {
            *r.lock().unwrap() = Some(memory_report().unwrap());
        }
        out
    });
    let report = report.lock().unwrap().take().unwrap();
    let names: Vec<_> = report.regions[0]
        .storages()
        .flat_map(|s| s.names.clone())
        .collect();
    assert_eq!(names, ["lhs", "rhs"], "{report}");
    assert!(report.to_string().contains("  lhs  [4] Float"), "{report}");
    y.sum(Kind::Float).backward();
    let expected = (&x + &z).exp();
    assert!(x.grad().allclose(&expected, 1e-6, 1e-6, false));
}

#[test]
// docs/semantics.md, rule D2 (E26).
fn bad_save_names_are_clear_errors() {
    let x = input();
    for (name, expected) in [
        ("", "save_for_backward got an empty name"),
        ("a.b", "save_for_backward name `a.b` must not contain '.'"),
    ] {
        let err = try_apply(
            NamedMul {
                names: [name, "ok"],
            },
            &[&x, &x],
        )
        .unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
        assert!(
            err.to_string().contains("NamedMul"),
            "names the function: {err}"
        );
    }
}

// ---------------------------------------------------------------------------
// Fix 3: one row per storage, views of another shape under it.

fn report_in_checkpoint<O: remat::io::RegionOutput + 'static>(
    x: &Tensor,
    body: impl Fn(Tensor) -> O + Send + 'static,
    finish: impl Fn(&O) -> Tensor + Send + 'static,
) -> (Tensor, MemoryReport) {
    let report = Arc::new(Mutex::new(None));
    let r = report.clone();
    let y = checkpoint("c").call(x, move |x| {
        let out = body(x);
        if !is_recomputing() {
            *r.lock().unwrap() = Some(memory_report().unwrap());
        }
        finish(&out)
    });
    let report = report.lock().unwrap().take().unwrap();
    (y, report)
}

#[test]
// docs/semantics.md, rule D3.
fn views_of_another_shape_are_view_rows_of_their_storage() {
    let x = Tensor::randn([4, 6], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let (y, report) = report_in_checkpoint(
        &x,
        |x| region("exp", Policy::Save).call(&x, |x| x.exp().view([6, 4])),
        |v| v.sin(),
    );
    let storages: Vec<_> = report.regions[0].storages().collect();
    assert_eq!(storages.len(), 1, "{report}");
    let s = storages[0];
    assert_eq!(
        (s.names.as_slice(), s.sizes.as_slice()),
        (&["saved.0".to_string()][..], &[4, 6][..])
    );
    assert_eq!(s.views.len(), 1, "{report}");
    assert_eq!(
        (s.views[0].names.as_slice(), s.views[0].sizes.as_slice()),
        (&["output.0".to_string()][..], &[6, 4][..])
    );
    assert_eq!((s.bytes, s.held), (96, 96));
    assert!(
        !report.to_string().contains("saved.0 = output.0"),
        "{report}"
    );
    y.sum(Kind::Float).backward();
}

#[test]
// docs/semantics.md, rule D3.
fn a_view_over_part_of_its_storage_says_how_much_it_holds() {
    let x = Tensor::randn([6, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let (y, report) = report_in_checkpoint(
        &x,
        |x| region("head", Policy::Save).call(&x, |x| (x * 2).narrow(0, 0, 4).sin()),
        |h| h.shallow_clone(),
    );
    let s = report.regions[0].storages().next().unwrap();
    assert_eq!((s.bytes, s.held), (96, 64), "{report}");
    assert!(
        report.to_string().contains("holds 64 B of 96 B"),
        "{report}"
    );
    y.sum(Kind::Float).backward();
}

// ---------------------------------------------------------------------------
// Fix 4: the capture callback runs only for what a checkpoint keeps.

/// What a pack hook saw: the kind and the captured context (an index).
type PackLog = Arc<Mutex<Vec<(SavedTensorKind, Option<usize>)>>>;

fn capturing(log: &PackLog) -> (TensorHooks, Arc<AtomicUsize>) {
    let captures = Arc::new(AtomicUsize::new(0));
    let (log, c) = (log.clone(), captures.clone());
    let hooks = TensorHooks::with_capture(
        move |t: Tensor| {
            let info = current_saved_tensor_info().unwrap();
            let context = info
                .context
                .and_then(|c| c.downcast_ref::<usize>().copied());
            log.lock().unwrap().push((info.kind, context));
            t
        },
        |t: &Tensor| t.shallow_clone(),
        move || c.fetch_add(1, SeqCst),
    );
    (hooks, captures)
}

#[test]
// docs/semantics.md, rules T2 and T6.
fn the_capture_callback_is_not_called_outside_checkpoints() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (hooks, captures) = capturing(&log);
    let x = input();
    let y = {
        let _scope = hooks.push();
        x.exp().sin()
    };
    assert_eq!(captures.load(SeqCst), 0);
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 2, "exp's result and sin's input are packed");
    assert!(
        log.iter().all(|e| *e == (SavedTensorKind::Backward, None)),
        "{log:?}"
    );
    y.sum(Kind::Float).backward();
}

#[test]
// docs/semantics.md, rules T3 and T6.
fn the_capture_callback_runs_for_save_regions_and_kept_outputs_only() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (hooks, captures) = capturing(&log);
    let x = input();
    let y = checkpoint("c").saved_tensors_hooks(hooks).call(&x, |x| {
        let bare = x.sin(); // bare code: the checkpoint's own business
        let r = region("r", Policy::Recompute).call(&bare, |b| b.cos());
        let h = region("exp", Policy::Save).call(&r, |r| r.exp());
        recompute_needs_tensor(&h);
        h.tanh()
    });
    use SavedTensorKind::*;
    let log = log.lock().unwrap().clone();
    // The input (no context), what `exp` saves (context of capture 0), then
    // its output kept for replay (context of capture 1, at region exit).
    assert_eq!(
        log,
        [
            (CheckpointInput, None),
            (Backward, Some(0)),
            (SaveOutput, Some(1))
        ]
    );
    assert_eq!(captures.load(SeqCst), 2);
    y.sum(Kind::Float).backward();
}

// ---------------------------------------------------------------------------
// Fix 5: parameters are not activation memory.

#[test]
// docs/semantics.md, rules D3 and S3.
fn a_parameter_saved_in_a_save_region_is_shown_apart_not_billed() {
    let w = Tensor::randn([32, 32, 3, 3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let x = Tensor::randn([1, 32, 8, 8], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let w2 = w.shallow_clone();
    let (y, report) = report_in_checkpoint(
        &x,
        move |x| {
            region("conv", Policy::Save).call(&x, |x| {
                x.conv2d::<Tensor>(&w2, None, [1, 1], [1, 1], [1, 1], 1)
            })
        },
        |h| {
            recompute_needs_tensor(h);
            h.relu()
        },
    );
    let conv = &report.regions[0];
    // Its input is rebuilt and its weight not billed: it keeps nothing (the
    // report is taken before `relu` asks for its output).
    assert_eq!((conv.bytes(), conv.storages().count()), (0, 0), "{report}");
    assert_eq!(conv.parameters.len(), 1, "{report}");
    assert_eq!(conv.parameters[0].bytes, storage_nbytes(&w));
    assert_eq!(storage_nbytes(&w), 36 * 1024);
    assert!(
        report
            .to_string()
            .contains("not activation memory (36.00 KiB)"),
        "{report}"
    );
    y.sum(Kind::Float).backward();
}

#[test]
// docs/semantics.md, rules D4 and T7.
fn a_parameter_saved_through_a_view_outside_checkpoints_is_not_billed() {
    let w = Tensor::randn([8, 16], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let x0 = Tensor::randn([4, 16], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let x = &x0 * 1; // an activation
    let (y, outside) =
        remat::diagnostics::track_saved_tensors(|| x.linear::<Tensor>(&w, None).tanh());
    let report = remat::diagnostics::saved_tensors_report(Some(&outside));
    // addmm/mm saves `x` and `w.t()`; tanh saves its result.
    let expected = storage_nbytes(&x) + storage_nbytes(&y);
    assert_eq!(report.outside_bytes(), Some(expected), "{report}");
    y.sum(Kind::Float).backward();
}

#[test]
// docs/semantics.md, rule T7.
fn pack_hooks_are_told_which_saves_are_parameters() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let hooks = TensorHooks::new(
        move |t: Tensor| {
            let info = current_saved_tensor_info().unwrap();
            log.lock().unwrap().push((t.size(), info.parameter));
            t
        },
        |t: &Tensor| t.shallow_clone(),
    );
    let w = Tensor::randn([8, 16], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let x = Tensor::randn([4, 16], (Kind::Float, Device::Cpu)).set_requires_grad(true) * 1;
    let y = {
        let _scope = hooks.push();
        x.matmul(&w.tr())
    };
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.contains(&(vec![16, 8], true)),
        "w.t() is a parameter: {seen:?}"
    );
    assert!(seen.contains(&(vec![4, 16], false)), "x is not: {seen:?}");
    y.sum(Kind::Float).backward();
}

// ---------------------------------------------------------------------------
// Fix 6: a region whose output is gone says so.

#[test]
// docs/semantics.md, rule D3.
fn a_released_region_output_is_noted() {
    let x = Tensor::randn([4, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let weak = Arc::new(Mutex::new(None));
    let w = weak.clone();
    let (y, report) = report_in_checkpoint(
        &x,
        move |x| {
            // `sin` saves `x * 2` (kept: not an input); its output is not saved.
            let gone = region("gone", Policy::Save).call(&x, |x| (x * 2).sin());
            *w.lock().unwrap() = WeakStorage::new(&gone);
            drop(gone); // and its graph, with what sin saved
            region("kept", Policy::Save).call(&x, |x| x.exp())
        },
        |h| h.sin(),
    );
    let gone = weak.lock().unwrap().take().unwrap();
    assert!(!gone.is_alive(), "the output's storage is freed");
    let text = report.to_string();
    assert!(
        report.regions[0].released && !report.regions[1].released,
        "{text}"
    );
    assert!(
        text.contains("c::gone")
            && text.contains("! output no longer alive: its saves were already released"),
        "{text}"
    );
    y.sum(Kind::Float).backward();
}

// ---------------------------------------------------------------------------
// Trace metadata and the inputs line.

#[test]
// docs/semantics.md, rule D1.
fn trace_scopes_show_their_metadata_in_brackets() {
    let x = input();
    let (y, trace) = collect_trace(|| {
        trace_scope("model", || {
            trace_scope_with(
                "attention",
                || "heads=4".to_string(),
                || checkpoint("c").call(&x, |x| region("core", Policy::Save).call(&x, |x| x.sin())),
            )
        })
    });
    assert_eq!(
        trace.to_string(),
        "remat trace\n  model\n    attention [heads=4]\n      core: save\n"
    );
    y.sum(Kind::Float).backward();
}

#[test]
// docs/semantics.md, rules D3 and C1.
fn the_memory_report_shows_the_inputs_kept_for_replay() {
    let x0 = Tensor::randn([4, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let x = x0.exp(); // an activation: replay needs it
    let (y, report) = report_in_checkpoint(
        &x,
        |x| region("sin", Policy::Recompute).call(&x, |x| x.sin()),
        |h| h.shallow_clone(),
    );
    let inputs = report.inputs.clone().unwrap();
    assert_eq!((inputs.bytes, inputs.storages), (storage_nbytes(&x), 1));
    assert!(
        report
            .to_string()
            .contains("inputs kept for replay: 64 B in 1 storage(s)"),
        "{report}"
    );
    y.sum(Kind::Float).backward();
}

// ---------------------------------------------------------------------------
// Snapshots of the memory report on small hand-built cases.

/// The report with call sites cut to their file (lines move with edits).
fn without_lines(mut report: MemoryReport) -> String {
    for r in &mut report.regions {
        r.location = r
            .location
            .rsplit_once(':')
            .map_or(r.location.clone(), |(f, _)| f.to_string());
    }
    report.to_string()
}

#[test]
// docs/semantics.md, rules D2 and D3.
fn memory_report_snapshot_of_hand_built_cases() {
    let x = Tensor::randn([4, 6], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let z = Tensor::randn([4, 6], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let w = Tensor::randn([8, 6], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let offload = TensorHooks::new(|t: Tensor| t.copy(), |t: &Tensor| t.shallow_clone());
    let (y, report) = report_in_checkpoint(
        &x,
        move |x| {
            let h = x.tanh(); // bare: the regions' input, replayed
                              // Named saves (and an empty slot, which is not a row).
            let named = region("named", Policy::Save).call((&h, &z), |(h, z)| {
                apply(
                    NamedMul {
                        names: ["lhs", "rhs"],
                    },
                    &[h, z],
                )
                .remove(0)
            });
            // An output also saved: one row, two names.
            let also = region("output_saved", Policy::Save).call(&h, |h| h.exp());
            // A view of another shape on the same storage.
            let view = region("view", Policy::Save).call(&h, |h| h.exp().view([6, 4]));
            // A save rebuilt from the region's input, not kept.
            let rebuilt = region("rebuilt", Policy::Save).call(&h, |h| h.sin());
            // Part of a storage kept: all of it stays resident.
            let part = region("part", Policy::Save).call(&h, |h| (h * 2).narrow(0, 0, 2).sin());
            // A parameter saved through a view (`w.t()`): not activation memory.
            let param = region("param", Policy::Save).call(&h, |h| h.linear::<Tensor>(&w, None));
            // A save handed to saved-tensor hooks.
            let offloaded = {
                let _hooks = offload.push();
                region("offloaded", Policy::Save).call(&h, |h| h.cos().exp())
            };
            // An output dropped, its saves with it.
            drop(region("released", Policy::Save).call(&h, |h| (h * 2).sin()));
            for t in [&named, &also, &view, &rebuilt, &part, &param, &offloaded] {
                recompute_needs_tensor(t);
            }
            (named, also, view, rebuilt, part, param, offloaded)
        },
        |(a, b, c, d, e, f, g)| {
            a.sum(Kind::Float)
                + b.sum(Kind::Float)
                + c.sum(Kind::Float)
                + d.sum(Kind::Float)
                + e.sum(Kind::Float)
                + f.sum(Kind::Float)
                + g.sum(Kind::Float)
        },
    );
    // Totals: a region's bytes are its rows' bytes; no storage is shared
    // between these regions, so the report's total is their sum.
    for r in &report.regions {
        assert_eq!(r.bytes(), r.storages().map(|s| s.bytes).sum::<i64>());
    }
    let regions: i64 = report.regions.iter().map(|r| r.bytes()).sum();
    let rows: usize = report.regions.iter().map(|r| r.storages().count()).sum();
    assert_eq!(
        (report.total_bytes(), report.storage_count()),
        (regions, rows),
        "{report}"
    );
    insta::assert_snapshot!("memory_report_hand_built", without_lines(report));
    y.backward();
}

#[test]
// docs/semantics.md, rule D1.
fn trace_snapshot_of_the_reference_model_with_metadata() {
    use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
    let model = Model::new(SMALL, 11);
    let (tokens, targets) = batch(SMALL, 1);
    for (policy, name) in [
        (ModelPolicy::Full, "full"),
        (ModelPolicy::Selective, "selective"),
        (ModelPolicy::SaveMlp, "save_mlp"),
    ] {
        let (loss, trace) = collect_trace(|| {
            trace_scope_with(
                "model",
                || format!("policy={name}"),
                || model.loss_api(&tokens, &targets, policy),
            )
        });
        insta::assert_snapshot!(format!("trace_{name}"), trace.to_string());
        loss.backward();
    }
}
