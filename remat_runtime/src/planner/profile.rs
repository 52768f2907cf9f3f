//! `profile()`: runs a model's forward under chosen decisions and records,
//! per kind of planned checkpoint, what each choice keeps and what its
//! replay costs.
//!
//! The model of memory (docs/planner.md): the bytes kept at the
//! forward→backward point are the whole-model report's total (every live
//! checkpoint's `Save` regions plus every save outside checkpoints, each
//! storage once), and they are additive over planned checkpoints:
//! `kept = baseline + Σ delta(kind, choice)`, where `baseline` is measured
//! with every planned checkpoint on and every `Auto` region recomputed, and
//! `delta` is measured by changing one representative of the kind alone.
//! Every choice of a kind is measured (2^R + 1 runs), so interactions
//! between the regions of one checkpoint are exact; between checkpoints
//! only their boundary tensors are shared, and those are kept under every
//! choice (as a checkpoint input, or saved by the first op reading them).
//!
//! The model of time: a checkpointed block costs what checkpointing it
//! with every `Auto` region saved adds to a step (its bare code's replay
//! and the runtime's own work: hooks, placeholders, bookkeeping), plus,
//! per region it recomputes, what recomputing that region instead of
//! saving it adds. For kinds a plan may turn off both are measured as
//! replays: the runtime times each checkpoint's replay inside the backward
//! of real steps (forward + backward), so the costs include what a forward
//! time misses (a replay runs in backward, with other caches and
//! allocations) and what early stop leaves out of a replay
//! (docs/semantics.md, rule C17), without the noise of the rest of the
//! step that a difference of two step times carries. Other kinds
//! fall back to forward times, less the forward time after the replay's
//! last save when early stop is on (from the times of the forward's
//! saves). Every cost is an [`Estimate`]: median and spread over its
//! samples, never negative.
//!
//! The model of the peak (backward.rs): the baseline's bytes in use at each
//! point of a traced backward, and what each choice changes in its own
//! block's, measured.
//!
//! Invariant: the profiler never accumulates gradients (its calibration
//! and traced backwards return the gradients they compute, as
//! `torch.autograd.grad` does, so parameters' `.grad` are untouched) and
//! leaves no plan active.

use crate::checkpointing::auto::{self, DecisionTable};
use crate::diagnostics::saved_report::{saved_tensors_report, track_saved_tensors};
use crate::error::{Error, Result};
use crate::planner::backward::{self, structural_delta};
use crate::planner::calibrate::calibrate;
use crate::planner::choice::Choice;
use crate::planner::cost::{ChoiceCost, CopyCost, LayerKind, Profile, MAX_AUTO_REGIONS};
use crate::planner::estimate::median;
use crate::planner::estimate::Estimate;
use crate::policy::Policy;
use crate::recorders::timing::{record_into, CheckpointCall, DeviceTimer, ProfileSink};
use crate::sync::lock;
use std::sync::Arc;
use tch::Tensor;

/// Runs `forward` (it returns the loss; a graph built and not yet
/// backpropagated) and returns the loss with the bytes kept for backward:
/// the whole-model report's total (what checkpoints keep, the inputs they
/// keep for replay, and what autograd saved outside them), each storage
/// once (see [`saved_tensors_report`]). This is the measure the planner
/// predicts and a budget bounds.
///
/// The report sees every live checkpoint of the process: measure with no
/// other graph alive (no other thread running a model).
///
/// ```
/// use remat_runtime::planner::measure_kept_bytes;
/// let x = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let (loss, bytes) = measure_kept_bytes(|| (&x * 2).exp().sum(tch::Kind::Float));
/// assert_eq!(bytes, 16); // `exp` keeps its 4-float result
/// loss.backward();
/// ```
pub fn measure_kept_bytes(forward: impl FnOnce() -> Tensor) -> (Tensor, i64) {
    let (loss, outside) = track_saved_tensors(forward);
    let report = saved_tensors_report(Some(&outside));
    let bytes =
        report.checkpoint_bytes() + report.input_bytes() + report.outside_bytes().unwrap_or(0);
    (loss, bytes)
}

/// Profiles a model for the planner with 3 timing runs; see
/// [`profile_with`].
///
/// ```
/// use remat_runtime::{checkpoint, planner, region, Policy};
/// let w = tch::Tensor::ones([8, 8], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let forward = || {
///     let w = w.shallow_clone();
///     checkpoint("layers.0").auto().call(&w, |w| {
///         let h = region("exp", Policy::Auto).call(&w, |w| (w * 2).exp());
///         remat_runtime::recompute_needs_tensor(&h);
///         h.sum(tch::Kind::Float)
///     })
/// };
/// let profile = planner::profile(forward).unwrap();
/// assert_eq!(profile.layers, ["layers.0"]);
/// assert_eq!(profile.kinds[0].regions, ["exp"]);
/// assert_eq!(profile.kinds[0].save_bytes, [256]); // exp keeps its 8x8 f32 result
/// ```
pub fn profile(forward: impl FnMut() -> Tensor) -> Result<Profile> {
    profile_with(forward, 3)
}

/// Profiles a model for the planner: `forward` runs the model's forward
/// and returns the loss. It is called `timing_runs` times with no plan
/// (every planned checkpoint on, every `Auto` region recomputed: the
/// baseline; forward times are medians over these runs and over the
/// checkpoints of a kind), then once per other choice of each kind of
/// checkpoint, with only one checkpoint of the kind changed; these losses
/// are dropped without backward. Then the calibration
/// ([`LayerKind::checkpoint_cost`], [`LayerKind::region_cost`]): a warm-up
/// step, then `timing_runs` rounds of `1 + Σ (1 + R)` forward and backward
/// steps over the kinds a plan may turn off (R: a kind's `Auto` regions):
/// every such block whole, then per kind its blocks checkpointed with
/// every region saved and, per region, with only that region recomputed;
/// each checkpoint's replay is timed inside their backward. Last, the
/// levels of the predicted peak (docs/planner.md, "Peak during backward"):
/// two baseline steps whose backward is traced node by node
/// ([`Profile::backward`]), then one per choice of each kind but the
/// baseline ([`ChoiceCost::level_delta`]), where the device says its bytes
/// in use. These backwards return the gradients they compute (as
/// `torch.autograd.grad` does) instead of accumulating them, so
/// parameters' `.grad` are untouched.
///
/// A planned checkpoint is one built with `auto()` or holding a
/// `Policy::Auto` region; it needs a name unique in the forward. The
/// forward must keep the same tensors every time it runs under the same
/// decisions.
///
/// ```
/// let err = remat_runtime::planner::profile_with(|| tch::Tensor::ones([1], tch::kind::FLOAT_CPU), 1);
/// assert!(err.unwrap_err().to_string().contains("nothing to plan"));
/// ```
pub fn profile_with(forward: impl FnMut() -> Tensor, timing_runs: usize) -> Result<Profile> {
    profile_inner(forward, timing_runs, false)
}

/// [`profile_with`], also considering `Policy::OFFLOAD` for every region a
/// choice saves (3^R + 1 choices per kind instead of 2^R + 1), with each
/// offloading choice's cost its saving twin's plus the bytes it moves
/// copied out and back, at a rate measured here ([`Profile::copy`]:
/// `timing_runs` copies of the largest amount a choice moves, between 1
/// and 64 MiB, on the loss's device). A plan from a profile taken with
/// [`profile_with`] never offloads.
///
/// ```
/// use remat_runtime::{checkpoint, planner, region, Policy};
/// let w = tch::Tensor::ones([8, 8], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let forward = || {
///     let w = w.shallow_clone();
///     checkpoint("layers.0").auto().call(&w, |w| {
///         let h = region("exp", Policy::Auto).call(&w, |w| (w * 2).exp());
///         remat_runtime::recompute_needs_tensor(&h);
///         h.sum(tch::Kind::Float)
///     })
/// };
/// let profile = planner::profile_with_offload(forward, 1).unwrap();
/// let kind = &profile.kinds[0];
/// assert_eq!(kind.choices.len(), 1 + 3); // whole, recompute, save, offload
/// let offload = kind.choices.iter().find(|c| c.moved_bytes > 0).unwrap();
/// assert_eq!(offload.moved_bytes, 256); // exp's result, moved instead of kept
/// assert!(profile.copy.is_some());
/// ```
pub fn profile_with_offload(
    forward: impl FnMut() -> Tensor,
    timing_runs: usize,
) -> Result<Profile> {
    profile_inner(forward, timing_runs, true)
}

fn profile_inner(
    mut forward: impl FnMut() -> Tensor,
    timing_runs: usize,
    offload: bool,
) -> Result<Profile> {
    let mut runs = 0;
    let mut device = tch::Device::Cpu;
    let mut run = |table: Option<Arc<DecisionTable>>, sink: Option<Arc<ProfileSink>>| {
        runs += 1;
        let _plan = auto::push(table);
        let _sink = sink.map(record_into);
        let (loss, bytes) = measure_kept_bytes(&mut forward);
        device = loss.device();
        drop(loss);
        bytes
    };

    // The baseline: structure, times and bytes.
    let mut baseline_bytes = None;
    let mut samples: Vec<Vec<CheckpointCall>> = Vec::new();
    for _ in 0..timing_runs.max(1) {
        let sink = Arc::new(ProfileSink::default());
        let bytes = run(None, Some(sink.clone()));
        match baseline_bytes {
            Some(b) if b != bytes => {
                return Err(Error::Plan(format!(
                    "the forward kept {b} bytes, then {bytes} bytes under the same decisions; \
                     the planner needs a forward that keeps the same tensors every time"
                )))
            }
            _ => baseline_bytes = Some(bytes),
        }
        let calls = lock(&sink.calls).iter().map(|c| lock(c).clone()).collect();
        samples.push(calls);
    }
    let baseline_bytes = baseline_bytes.unwrap_or(0);
    let (layers, mut kinds, layer_kind) = structure(&samples[0], offload)?;
    let tails: Vec<Vec<u64>> = kinds
        .iter_mut()
        .map(|kind| time_kind(kind, &layers, &samples))
        .collect();

    // One run per choice of each kind, on its first member.
    let mut profile = Profile::unmeasured(baseline_bytes, layers, layer_kind, kinds);
    for (k, c, choices) in profile.one_changed() {
        let table = profile.table("the profiler's plan".into(), &choices);
        let bytes = run(Some(Arc::new(table)), None);
        profile.kinds[k].choices[c].bytes = bytes - baseline_bytes;
    }
    if offload {
        moved_bytes(&mut profile);
        let most = profile
            .kinds
            .iter()
            .flat_map(|k| k.choices.iter().map(|c| c.moved_bytes))
            .max()
            .unwrap_or(0);
        profile.copy = Some(copy_cost(device, most, timing_runs.max(1))?);
    }
    runs += calibrate(&mut profile, &mut forward, timing_runs.max(1))?;
    let copy = profile.copy;
    for (kind, tails) in profile.kinds.iter_mut().zip(&tails) {
        finish_kind(kind, tails, copy);
    }
    // After the calibration's steps: a process's first backward allocates
    // what it keeps for good (the engine's threads, kernels' caches), which
    // is no level of this model's backward.
    runs += backward::TRACED_STEPS;
    profile.backward = backward::measure(&mut forward, &profile.layers)?;
    runs += backward::measure_choices(&mut profile, &mut forward)?;
    profile.runs = runs;
    Ok(profile)
}

type Structure = (Vec<String>, Vec<LayerKind>, Vec<usize>);

/// The planned checkpoints of one forward, grouped into kinds.
fn structure(calls: &[CheckpointCall], offload: bool) -> Result<Structure> {
    let mut layers: Vec<String> = Vec::new();
    let mut kinds: Vec<LayerKind> = Vec::new();
    // What each kind's first member saved on the baseline forward: a kind
    // is a promise that its members keep the same bytes, so a checkpoint
    // alike in regions and inputs whose body saves otherwise is a kind of
    // its own (docs/planner.md, "Kinds").
    let mut signatures: Vec<&[(Vec<i64>, tch::Kind)]> = Vec::new();
    let mut layer_kind = Vec::new();
    for call in calls {
        let regions: Vec<String> = call
            .regions
            .iter()
            .filter(|r| r.declared == Policy::Auto)
            .map(|r| r.name.clone())
            .collect();
        if !call.auto && regions.is_empty() {
            continue;
        }
        let Some(name) = call.name.clone() else {
            return Err(Error::Plan(
                "an unnamed checkpoint uses `auto`; a plan decides by checkpoint name: \
                 give it a name unique in the forward (e.g. `layers.{i}`)"
                    .into(),
            ));
        };
        if layers.contains(&name) {
            return Err(Error::Plan(format!(
                "checkpoint `{name}` runs twice in one forward; a plan decides by \
                 checkpoint name: give each call its own name (e.g. with an index)"
            )));
        }
        if regions.len() > MAX_AUTO_REGIONS {
            return Err(Error::Plan(format!(
                "checkpoint `{name}` has {} `auto` regions; the planner enumerates their \
                 choices and takes at most {MAX_AUTO_REGIONS}: fix some regions' policies",
                regions.len()
            )));
        }
        let k = kinds.iter().zip(&signatures).position(|(k, saved)| {
            k.regions == regions
                && k.can_disable == call.auto
                && k.input_sizes == call.input_sizes
                && *saved == &call.saved_shapes[..]
        });
        let k = match k {
            Some(k) => k,
            None => {
                let n = regions.len();
                let all = if offload {
                    Choice::all_with_offload(n, call.auto)
                } else {
                    Choice::all(n, call.auto)
                };
                let choices = all
                    .into_iter()
                    .map(|choice| ChoiceCost {
                        choice,
                        bytes: 0,
                        replay_ns: 0,
                        spread_ns: 0,
                        working_set: 0,
                        level_delta: 0,
                        tail_ns: 0,
                        moved_bytes: 0,
                    })
                    .collect();
                kinds.push(LayerKind {
                    save_bytes: vec![0; n],
                    region_ns: vec![0; n],
                    regions,
                    can_disable: call.auto,
                    input_sizes: call.input_sizes.clone(),
                    input_bytes: call.input_bytes,
                    members: Vec::new(),
                    body_ns: 0,
                    bare_ns: 0,
                    checkpoint_cost: Estimate::default(),
                    region_cost: vec![Estimate::default(); n],
                    replay_measured: false,
                    whole_bytes: None,
                    choices,
                });
                signatures.push(&call.saved_shapes);
                kinds.len() - 1
            }
        };
        kinds[k].members.push(layers.len());
        layer_kind.push(k);
        layers.push(name);
    }
    if layers.is_empty() {
        return Err(Error::Plan(
            "the forward ran no `auto()` checkpoint and no `Policy::Auto` region: nothing to \
             plan"
                .into(),
        ));
    }
    Ok((layers, kinds, layer_kind))
}

/// Median forward times of `kind`, over its members and the runs; they are
/// its costs (with their spreads) until the calibration measures steps.
/// Returns each choice's tail (see [`tail_ns`]).
fn time_kind(kind: &mut LayerKind, layers: &[String], samples: &[Vec<CheckpointCall>]) -> Vec<u64> {
    let calls: Vec<&CheckpointCall> = samples
        .iter()
        .flat_map(|run| {
            kind.members.iter().filter_map(|&m| {
                run.iter()
                    .find(|c| c.name.as_deref() == Some(layers[m].as_str()))
            })
        })
        .collect();
    let ns = |d: std::time::Duration| d.as_nanos() as i64;
    let region_samples = |name: &str| -> Vec<i64> {
        calls
            .iter()
            .flat_map(|c| c.regions.iter().filter(|x| x.name == name))
            .map(|x| ns(x.elapsed))
            .collect()
    };
    kind.body_ns =
        Estimate::from_samples(&calls.iter().map(|c| ns(c.elapsed)).collect::<Vec<_>>()).ns;
    for (r, name) in kind.regions.iter().enumerate() {
        let e = Estimate::from_samples(&region_samples(name));
        kind.region_ns[r] = e.ns;
        kind.region_cost[r] = e;
    }
    // Per call, what replays under every choice: the closure minus its
    // `Auto` regions and its fixed `Save` regions (which never replay).
    let bare: Vec<i64> = calls
        .iter()
        .map(|c| {
            let skipped: i64 = c
                .regions
                .iter()
                .filter(|x| x.declared.keeps() || kind.regions.contains(&x.name))
                .map(|x| ns(x.elapsed))
                .sum();
            (ns(c.elapsed) - skipped).max(0)
        })
        .collect();
    kind.checkpoint_cost = Estimate::from_samples(&bare);
    kind.bare_ns = kind.checkpoint_cost.ns;
    kind.choices
        .iter()
        .map(|c| {
            if !c.choice.checkpointed {
                return 0;
            }
            median(
                calls
                    .iter()
                    .map(|call| tail_ns(&kind.regions, call, &c.choice.save)),
            )
            .unwrap_or_default()
        })
        .collect()
}

/// The forward time of what a replay under `save` (per `Auto` region:
/// saved) would run after its stop, which early stop skips
/// (docs/semantics.md, rule C17); 0 for a checkpoint without early stop.
/// The stop is the last save that is a holder under the choice, or the
/// start of the last region the replay skips, whichever is later (a
/// skipped region may rebuild saves from its inputs, which the replay must
/// reach: assumed so, which errs towards a longer replay).
fn tail_ns(regions: &[String], call: &CheckpointCall, save: &[bool]) -> u64 {
    if !call.early_stop {
        return 0;
    }
    let skipped: Vec<(std::time::Duration, std::time::Duration)> = call
        .regions
        .iter()
        .filter(|r| match r.declared {
            Policy::Save | Policy::Offload(_) => true,
            Policy::Auto => regions
                .iter()
                .position(|n| n == &r.name)
                .is_some_and(|i| save[i]),
            Policy::Recompute => false,
        })
        .map(|r| (r.start, r.start + r.elapsed))
        .collect();
    let inside = |t: std::time::Duration| skipped.iter().any(|&(a, b)| a <= t && t <= b);
    let last_save = call.saves.iter().copied().filter(|&t| !inside(t)).max();
    let last_skipped = skipped.iter().map(|&(a, _)| a).max();
    let stop = last_save.max(last_skipped).unwrap_or_default();
    let end = call.elapsed;
    let skipped_after: std::time::Duration = skipped
        .iter()
        .map(|&(a, b)| b.min(end).saturating_sub(a.max(stop)))
        .sum();
    end.saturating_sub(stop)
        .saturating_sub(skipped_after)
        .as_nanos() as u64
}

/// Per offloading choice, the bytes it moves: what its saving twin keeps
/// more than it does.
fn moved_bytes(profile: &mut Profile) {
    for kind in &mut profile.kinds {
        let twins: Vec<i64> = kind
            .choices
            .iter()
            .map(|c| {
                let kept = c.choice.kept();
                let twin = kind.choices.iter().find(|t| t.choice == kept);
                twin.map_or(0, |t| (t.bytes - c.bytes).max(0))
            })
            .collect();
        for (c, moved) in kind.choices.iter_mut().zip(twins) {
            c.moved_bytes = moved;
        }
    }
}

/// Times copying `bytes` (clamped to 1-64 MiB) from `device` to the CPU
/// and back, as an `Offload` region does: `rounds` samples after a warm-up.
fn copy_cost(device: tch::Device, bytes: i64, rounds: usize) -> Result<CopyCost> {
    let bytes = bytes.clamp(1 << 20, 64 << 20);
    let source = Tensor::f_zeros([bytes / 4], (tch::Kind::Float, device))?;
    let once = || -> Result<u64> {
        let start = DeviceTimer::start();
        let out =
            source.f_to_device_(tch::Device::Cpu, tch::Kind::Float, device.is_cuda(), true)?;
        let back = out.f_to_device_(device, tch::Kind::Float, device.is_cuda(), true)?;
        drop((out, back));
        Ok(start.elapsed().as_nanos() as u64)
    };
    once()?;
    let samples = (0..rounds.max(3))
        .map(|_| once().map(|ns| ns as i64))
        .collect::<Result<Vec<i64>>>()?;
    Ok(CopyCost {
        bytes,
        cost: Estimate::from_samples(&samples),
    })
}

/// Replay times, working sets and the per-region summaries of a measured
/// kind; `tails` is what early stop skips of each choice's replay.
fn finish_kind(kind: &mut LayerKind, tails: &[u64], copy: Option<CopyCost>) {
    let whole = kind
        .choices
        .iter()
        .find(|c| !c.choice.checkpointed)
        .map(|c| c.bytes);
    let most = kind.choices.iter().map(|c| c.bytes).max().unwrap_or(0);
    for (c, &tail) in kind.choices.iter_mut().zip(tails) {
        if c.choice.checkpointed {
            let mut cost = (0..kind.regions.len())
                .filter(|&r| !c.choice.save[r])
                .fold(kind.checkpoint_cost, |sum, r| sum + kind.region_cost[r]);
            // docs/semantics.md, rule O1: an offloading choice replays as
            // its saving twin and copies what it moves out and back.
            if let (Some(copy), true) = (copy, c.moved_bytes > 0) {
                cost = cost + copy.for_bytes(c.moved_bytes);
            }
            // docs/semantics.md, rule C17: an early-stopped replay ends at
            // its last save. Measured replays already stopped so; a forward
            // time still holds the tail, which is taken off.
            let skipped = if kind.replay_measured { 0 } else { tail };
            c.replay_ns = cost.ns.saturating_sub(skipped);
            c.spread_ns = cost.spread_ns;
            c.tail_ns = tail;
            c.working_set = (whole.unwrap_or(most) - c.bytes).max(0);
        }
    }
    for r in 0..kind.regions.len() {
        let alone = kind.choices.iter().find(|c| {
            c.choice.checkpointed
                && !c.choice.offloads(r)
                && (0..kind.regions.len()).all(|i| c.choice.save[i] == (i == r))
        });
        kind.save_bytes[r] = alone.map_or(0, |c| c.bytes);
    }
    kind.whole_bytes = whole.map(|w| w + kind.input_bytes);
    // Until the backward's levels are measured (backward::measure_choices).
    let base = kind.choices[Profile::baseline_index(kind)].clone();
    for c in &mut kind.choices {
        c.level_delta = structural_delta(c, &base);
    }
}

#[cfg(test)]
mod tests {
    use super::{finish_kind, structure, tail_ns, time_kind};
    use crate::policy::Policy;
    use crate::recorders::timing::{CheckpointCall, RegionCall};
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A 10 ms closure: bare code with saves at 1 and 2 ms, the `Auto`
    /// region `attn` over 2..5 ms (saves at 3 and 4 ms), bare code, the
    /// `Auto` region `mlp` over 6..9 ms (a save at 7 ms), then 1 ms of bare
    /// code that saves nothing.
    fn call(early_stop: bool) -> CheckpointCall {
        let region = |name: &str, start, end| RegionCall {
            name: name.into(),
            declared: Policy::Auto,
            start: ms(start),
            elapsed: ms(end - start),
        };
        CheckpointCall {
            elapsed: ms(10),
            early_stop,
            saves: [1, 2, 3, 4, 7].map(ms).to_vec(),
            regions: vec![region("attn", 2, 5), region("mlp", 6, 9)],
            ..CheckpointCall::default()
        }
    }

    #[test]
    // docs/semantics.md, rule C17: a replay runs up to its last save.
    fn the_tail_is_what_replays_after_the_last_save_of_the_choice() {
        let regions = ["attn".to_string(), "mlp".to_string()];
        let tail = |early_stop, save: [bool; 2]| tail_ns(&regions, &call(early_stop), &save);
        // Both recomputed: the last save is in `mlp` at 7 ms.
        assert_eq!(tail(true, [false, false]), 3_000_000);
        // `mlp` saved: the replay must reach it (it may rebuild its input),
        // then only bare code follows.
        assert_eq!(tail(true, [false, true]), 1_000_000);
        // `attn` saved: its saves do not count, the last is still at 7 ms.
        assert_eq!(tail(true, [true, false]), 3_000_000);
        // Without early stop nothing is skipped.
        assert_eq!(tail(false, [false, false]), 0);
    }

    /// The early-stopping call, named as a layer.
    fn layer_call() -> CheckpointCall {
        CheckpointCall {
            name: Some("layers.0".into()),
            ..call(true)
        }
    }

    #[test]
    // docs/semantics.md, rule C17: a forward time holds the tail an
    // early-stopped replay skips, so it is taken off; measured steps already
    // skipped it, so it is not taken off twice.
    fn the_tail_comes_off_forward_times_only() {
        let call = layer_call();
        let (layers, mut kinds, _) = structure(std::slice::from_ref(&call), false).unwrap();
        let kind = &mut kinds[0];
        let tails = time_kind(kind, &layers, &[vec![call]]);
        let replay = |kind: &super::LayerKind, save: [bool; 2]| {
            let c = kind
                .choices
                .iter()
                .find(|c| c.choice.checkpointed && c.choice.save == save)
                .unwrap();
            (c.replay_ns / 1_000_000, c.tail_ns / 1_000_000)
        };
        // Always checkpointed: timed by its forward. Bare code 4 ms, each
        // region 3 ms.
        assert!(!kind.replay_measured);
        finish_kind(kind, &tails, None);
        assert_eq!(replay(kind, [false, false]), (4 + 3 + 3 - 3, 3));
        assert_eq!(replay(kind, [false, true]), (4 + 3 - 1, 1));
        assert_eq!(replay(kind, [true, true]), (4 - 1, 1));
        // The same costs as measured replays.
        kind.replay_measured = true;
        finish_kind(kind, &tails, None);
        assert_eq!(replay(kind, [false, false]), (4 + 3 + 3, 3));
        assert_eq!(replay(kind, [false, true]), (4 + 3, 1));
    }

    #[test]
    // docs/semantics.md, rule O1: an offloading choice costs its saving
    // twin plus its moved bytes copied out and back, and keeps less.
    fn an_offloading_choice_costs_its_twin_plus_the_copy() {
        use super::{moved_bytes, CopyCost, Profile};
        use crate::planner::estimate::Estimate;
        let call = layer_call();
        let (layers, mut kinds, layer_kind) = structure(std::slice::from_ref(&call), true).unwrap();
        assert_eq!(
            kinds[0].choices.len(),
            9,
            "3^2: the checkpoint is not `auto()`"
        );
        let tails = time_kind(&mut kinds[0], &layers, &[vec![call]]);
        // Saving region r keeps 100 << r bytes; offloading it keeps none.
        for c in &mut kinds[0].choices {
            c.bytes = (0..2)
                .filter(|&r| c.choice.save[r] && !c.choice.offloads(r))
                .map(|r| 100 << r)
                .sum();
        }
        let mut profile = Profile::unmeasured(0, layers, layer_kind, kinds);
        moved_bytes(&mut profile);
        let copy = CopyCost {
            bytes: 100,
            cost: Estimate::exact(1_000_000),
        };
        let kind = &mut profile.kinds[0];
        finish_kind(kind, &tails, Some(copy));
        let find = |save: [bool; 2], offload: [bool; 2]| {
            kind.choices
                .iter()
                .find(|c| {
                    c.choice.checkpointed && c.choice.save == save && c.choice.offload == offload
                })
                .unwrap()
        };
        let twin = find([true, true], [false, false]);
        let both = find([true, true], [true, true]);
        let mlp = find([true, true], [false, true]);
        assert_eq!((both.moved_bytes, mlp.moved_bytes), (300, 200));
        assert_eq!((both.bytes, mlp.bytes), (0, 100));
        assert_eq!(both.replay_ns, twin.replay_ns + 3_000_000);
        assert_eq!(mlp.replay_ns, twin.replay_ns + 2_000_000);
        assert_eq!(twin.moved_bytes, 0);
    }
}
