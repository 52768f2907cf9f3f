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
//! Invariant: the profiler never accumulates gradients (its calibration
//! backward returns the gradients of the checkpoints' inputs and of the
//! parameters saved inside them, as `torch.autograd.grad` does, so
//! parameters' `.grad` are untouched) and leaves no plan active.

use crate::bridge::storage_key;
use crate::checkpointing::auto::{self, DecisionTable};
use crate::checkpointing::policy::Policy;
use crate::diagnostics::format::human_bytes;
use crate::diagnostics::median::median;
use crate::diagnostics::saved_report::{saved_tensors_report, track_saved_tensors};
use crate::diagnostics::timing::{record_into, CheckpointCall, DeviceTimer, ProfileSink};
use crate::error::{Error, Result};
use crate::planner::choice::{decision_table, Choice};
use crate::planner::estimate::Estimate;
use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use tch::Tensor;

/// How many `Auto` regions one checkpoint may have (its choices are
/// enumerated: 2^R + 1 profiling runs per kind of checkpoint).
pub const MAX_AUTO_REGIONS: usize = 8;

/// One choice of a [`LayerKind`] with its predicted cost.
#[derive(Clone, Debug, PartialEq)]
pub struct ChoiceCost {
    /// What the checkpoint does.
    pub choice: Choice,
    /// Bytes kept at the forward→backward point, relative to the baseline
    /// (every planned checkpoint on, every `Auto` region recomputed).
    pub bytes: i64,
    /// Time it adds to a step, in nanoseconds: for a checkpointed choice,
    /// the kind's [`LayerKind::checkpoint_cost`] plus the
    /// [`LayerKind::region_cost`] of each region it recomputes (for a kind
    /// timed by its forward, less [`ChoiceCost::tail_ns`]); 0 when whole.
    pub replay_ns: u64,
    /// The spread of `replay_ns` (the sum of its terms' spreads), ns.
    pub spread_ns: u64,
    /// Bytes its replay rebuilds while the backward goes through it: what
    /// the block keeps whole minus what this choice keeps (0 when whole).
    pub working_set: i64,
    /// Forward time, ns, of the code after this choice's last save, which
    /// an early-stopped replay does not run (docs/semantics.md, rule C17).
    /// For a kind timed by its forward ([`LayerKind::replay_measured`]
    /// false) it is taken off `replay_ns`; measured replays already stopped
    /// there, so for them it only says what early stop saved. 0 for a
    /// checkpoint without early stop and when whole.
    pub tail_ns: u64,
    /// Bytes an offloading choice moves off the device (what the same
    /// choice without offload keeps more); 0 for the others. Its
    /// `replay_ns` includes copying them out and back at
    /// [`Profile::copy`]'s measured rate.
    pub moved_bytes: i64,
}

/// The measured cost of copying `bytes` off the model's device to the CPU
/// and back: what an offloading choice pays per byte it moves.
///
/// ```
/// use remat_runtime::planner::{CopyCost, Estimate};
/// let c = CopyCost { bytes: 1 << 20, cost: Estimate { ns: 100_000, spread_ns: 10_000 } };
/// assert_eq!(c.for_bytes(1 << 21).ns, 200_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CopyCost {
    /// The size copied.
    pub bytes: i64,
    /// Out and back, both directions together.
    pub cost: Estimate,
}

impl CopyCost {
    /// The cost of moving `bytes` out and back, at the measured rate.
    pub fn for_bytes(&self, bytes: i64) -> Estimate {
        let scale = |ns: u64| (ns as f64 * bytes.max(0) as f64 / self.bytes.max(1) as f64) as u64;
        Estimate {
            ns: scale(self.cost.ns),
            spread_ns: scale(self.cost.spread_ns),
        }
    }
}

/// Checkpoints that are alike (same `Auto` region names, same input
/// shapes, both `auto()` or neither): profiled once.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerKind {
    /// Its `Auto` regions, in forward order.
    pub regions: Vec<String>,
    /// Built with `auto()`: the plan may turn the checkpoint off.
    pub can_disable: bool,
    /// Shapes of its inputs.
    pub input_sizes: Vec<Vec<i64>>,
    /// Bytes its checkpoint keeps as inputs (distinct storages).
    pub input_bytes: i64,
    /// The planned checkpoints of this kind (indices into [`Profile::layers`]).
    pub members: Vec<usize>,
    /// Forward time of the whole closure (median), ns.
    pub body_ns: u64,
    /// Forward time of each `Auto` region body (median), ns.
    pub region_ns: Vec<u64>,
    /// Forward time of what replays under every choice: the closure minus
    /// its `Auto` regions and its fixed `Save` regions, ns.
    pub bare_ns: u64,
    /// What one block of this kind adds to a step when checkpointed with
    /// every `Auto` region saved: its replay (the bare code, and the hooks
    /// and bookkeeping of the replay itself).
    pub checkpoint_cost: Estimate,
    /// Per `Auto` region: what recomputing it instead of saving it adds
    /// to a step, per block.
    pub region_cost: Vec<Estimate>,
    /// Whether `checkpoint_cost` and `region_cost` come from replays timed
    /// inside the backward of measured steps (kinds a plan may turn off, in
    /// a model whose checkpoints' inputs need gradients) or, otherwise,
    /// from forward times of the bare code and the regions.
    pub replay_measured: bool,
    /// Bytes each `Auto` region adds when it alone is `Save` (its saves and
    /// the outputs kept for consumers).
    pub save_bytes: Vec<i64>,
    /// Bytes the block keeps when not checkpointed, its input included
    /// (`None` for a checkpoint that is not `auto()`).
    pub whole_bytes: Option<i64>,
    /// Every choice, as [`Choice::all`] orders them.
    pub choices: Vec<ChoiceCost>,
}

/// What [`profile`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Bytes kept at the forward→backward point with every planned
    /// checkpoint on and every `Auto` region recomputed (measured).
    pub baseline_bytes: i64,
    /// The planned checkpoints' names, in forward order.
    pub layers: Vec<String>,
    /// The kind of each layer (index into `kinds`).
    pub layer_kind: Vec<usize>,
    /// The distinct kinds.
    pub kinds: Vec<LayerKind>,
    /// Forward runs the profile took.
    pub runs: usize,
    /// With offload considered ([`profile_with_offload`]): the measured
    /// copy cost that offloading choices pay. `None`: no choice offloads.
    pub copy: Option<CopyCost>,
}

impl Profile {
    /// The kind of the layer named `name`.
    ///
    /// ```no_run
    /// # fn f(p: &remat_runtime::planner::Profile) {
    /// let attention = &p.kind_of("layers.0").unwrap().regions[0];
    /// # }
    /// ```
    pub fn kind_of(&self, name: &str) -> Option<&LayerKind> {
        let i = self.layers.iter().position(|l| l == name)?;
        Some(&self.kinds[self.layer_kind[i]])
    }

    /// The runtime table for one choice index per layer.
    pub(crate) fn table(&self, describe: String, choices: &[usize]) -> DecisionTable {
        decision_table(
            describe,
            self.layers.iter().enumerate().map(|(i, name)| {
                let kind = &self.kinds[self.layer_kind[i]];
                (
                    name.as_str(),
                    kind.regions.as_slice(),
                    &kind.choices[choices[i]].choice,
                )
            }),
        )
    }

    /// The index of the baseline choice in `kind`'s list.
    pub(crate) fn baseline_index(kind: &LayerKind) -> usize {
        usize::from(kind.can_disable)
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "profile: {} planned checkpoint(s) of {} kind(s), baseline {} kept, {} runs",
            self.layers.len(),
            self.kinds.len(),
            human_bytes(self.baseline_bytes),
            self.runs
        )?;
        for kind in &self.kinds {
            let names: Vec<&str> = kind
                .members
                .iter()
                .map(|&i| self.layers[i].as_str())
                .collect();
            writeln!(
                f,
                "  {} (x{}): inputs {}, whole {}, bare code {:.3} ms forward, checkpointed \
                 with all saved {} ({})",
                names.join(", "),
                names.len(),
                human_bytes(kind.input_bytes),
                kind.whole_bytes.map_or("-".into(), human_bytes),
                kind.bare_ns as f64 / 1e6,
                kind.checkpoint_cost,
                if kind.replay_measured {
                    "replays in backward"
                } else {
                    "forward times"
                }
            )?;
            for (r, name) in kind.regions.iter().enumerate() {
                writeln!(
                    f,
                    "    region {name}: save keeps +{}, body {:.3} ms forward, recompute {}",
                    human_bytes(kind.save_bytes[r]),
                    kind.region_ns[r] as f64 / 1e6,
                    kind.region_cost[r]
                )?;
            }
            for c in &kind.choices {
                writeln!(
                    f,
                    "    {:<36} {:>+12} B  replay {:>8.3} ± {:.3} ms  working set {}",
                    c.choice.to_string(),
                    c.bytes,
                    c.replay_ns as f64 / 1e6,
                    c.spread_ns as f64 / 1e6,
                    human_bytes(c.working_set)
                )?;
            }
        }
        Ok(())
    }
}

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
/// each checkpoint's replay is timed inside their backward.
/// Their backward returns the gradients of the checkpoints' inputs and of
/// the parameters saved inside them (as `torch.autograd.grad` does)
/// instead of accumulating them, so parameters' `.grad` are untouched.
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
    let baseline: Vec<usize> = layer_kind
        .iter()
        .map(|&k| Profile::baseline_index(&kinds[k]))
        .collect();
    let mut profile = Profile {
        baseline_bytes,
        layers,
        layer_kind,
        kinds,
        runs: 0,
        copy: None,
    };
    for k in 0..profile.kinds.len() {
        let rep = profile.kinds[k].members[0];
        for c in 0..profile.kinds[k].choices.len() {
            if c == baseline[rep] {
                continue;
            }
            let mut choices = baseline.clone();
            choices[rep] = c;
            let table = profile.table("the profiler's plan".into(), &choices);
            let bytes = run(Some(Arc::new(table)), None);
            profile.kinds[k].choices[c].bytes = bytes - baseline_bytes;
        }
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
    profile.runs = runs;
    Ok(profile)
}

/// What one timed step measured.
struct Step {
    /// The leaves that this step's checkpoints saved.
    leaves: Vec<Tensor>,
    /// Per checkpoint call, by name: its replays' time inside the backward.
    replays: HashMap<String, u64>,
}

/// One forward + backward under `table`, its replays timed. The backward computes
/// gradients (returned, not accumulated) for the checkpoints' inputs and for
/// `leaves`, the parameters saved inside checkpoints. `None` when no
/// checkpoint input requires grad (nothing to time a backward with).
fn replay_step(
    forward: &mut impl FnMut() -> Tensor,
    table: DecisionTable,
    leaves: &[Tensor],
) -> Result<Option<Step>> {
    let sink = Arc::new(ProfileSink {
        grad_inputs: Some(Default::default()),
        ..ProfileSink::default()
    });
    let _plan = auto::push(Some(Arc::new(table)));
    let _sink = record_into(sink.clone());
    let loss = forward();
    let mut inputs = std::mem::take(&mut *lock(sink.grad_inputs.as_ref().expect("set above")));
    if inputs.is_empty() || !loss.requires_grad() {
        return Ok(None);
    }
    inputs.extend(leaves.iter().map(Tensor::shallow_clone));
    Tensor::f_run_backward(&[&loss], &inputs, false, false).map_err(|e| {
        Error::Plan(format!(
            "the profiler's timing backward failed (the forward must return a loss that \
             backpropagates through its checkpoints): {e}"
        ))
    })?;
    let (mut seen, mut leaves, mut replays) = (HashSet::new(), Vec::new(), HashMap::new());
    for call in lock(&sink.calls).iter() {
        let call = lock(call);
        leaves.extend(
            call.leaves
                .0
                .iter()
                .filter(|t| storage_key(t).is_some_and(|k| seen.insert(k)))
                .map(Tensor::shallow_clone),
        );
        if let Some(name) = &call.name {
            replays.insert(name.clone(), call.replay.as_nanos() as u64);
        }
    }
    Ok(Some(Step { leaves, replays }))
}

/// How far a replay-measured cost may be from the step time it adds, as a
/// share of the cost: its spread is at least this. A replay timed in the
/// profile leaves out what checkpointing changes in the rest of the step
/// (docs/planner.md, "The model of cost"), and the profile's own spread
/// says nothing of that; where the samples agree closely, two profiles
/// would otherwise call plans different that the model cannot tell apart.
/// 20%: the bench's predicted-against-measured table put the hand
/// policies' measured extra at 0.95, 1.00 and 1.30 times the prediction
/// (docs/performance.md, section 4).
///
/// ```
/// assert!(remat_runtime::planner::MODEL_ERROR > 0.0);
/// ```
pub const MODEL_ERROR: f64 = 0.20;

/// Measures [`LayerKind::checkpoint_cost`] and [`LayerKind::region_cost`]
/// for the kinds a plan may turn off, from their replays timed inside the
/// backward of real steps: after a warm-up step with every block
/// checkpointed (which finds the parameters saved in checkpoints, whose
/// gradients the steps compute, so that a block does a real step's work),
/// `rounds` rounds of a step with every such block whole and, per kind, a
/// step with its blocks checkpointed and every region saved (each block's
/// replay: a sample of the checkpoint cost), then one per region with only that region
/// recomputed (its replay minus the same block's all-saved replay of the
/// round: a sample of the region's cost). A replay is timed alone, not as
/// the difference of two steps, so the noise of the rest of the step stays
/// out of it (docs/planner.md, "The model of cost"). Returns the forward
/// runs it took.
fn calibrate(
    profile: &mut Profile,
    forward: &mut impl FnMut() -> Tensor,
    rounds: usize,
) -> Result<usize> {
    let kinds: Vec<usize> = (0..profile.kinds.len())
        .filter(|&k| profile.kinds[k].can_disable)
        .collect();
    if kinds.is_empty() {
        return Ok(0);
    }
    let baseline: Vec<usize> = profile
        .layer_kind
        .iter()
        .map(|&k| Profile::baseline_index(&profile.kinds[k]))
        .collect();
    // Whole is choice 0 of a kind that can be turned off (see `Choice::all`).
    let whole: Vec<usize> = baseline
        .iter()
        .zip(&profile.layer_kind)
        .map(|(&b, &k)| if profile.kinds[k].can_disable { 0 } else { b })
        .collect();
    // Per kind: the all-saved choice, then per region the choice that
    // recomputes it alone.
    let variants: Vec<Vec<usize>> = kinds
        .iter()
        .map(|&k| {
            let kind = &profile.kinds[k];
            let n = kind.regions.len();
            let index = |recomputed: Option<usize>| {
                let want = Choice {
                    checkpointed: true,
                    save: (0..n).map(|r| Some(r) != recomputed).collect(),
                    offload: vec![false; n],
                };
                kind.choices
                    .iter()
                    .position(|c| c.choice == want)
                    .expect("every assignment is a choice")
            };
            std::iter::once(index(None))
                .chain((0..n).map(|r| index(Some(r))))
                .collect()
        })
        .collect();
    let table = |choices: &[usize]| profile.table("the profiler's calibration".into(), choices);
    let mut runs = 1;
    // Also the warm-up: the first backward pays one-time costs.
    let Some(Step { leaves, .. }) = replay_step(forward, table(&baseline), &[])? else {
        return Ok(runs);
    };
    // samples[j][v]: kind j's variant v, per block and round: the all-saved
    // replay, then each region's replay minus the all-saved one.
    let mut samples: Vec<Vec<Vec<i64>>> =
        variants.iter().map(|v| vec![Vec::new(); v.len()]).collect();
    for _ in 0..rounds {
        // Every block whole: the same work in every round before the
        // kinds' steps (also what the bench measures `none` as).
        if replay_step(forward, table(&whole), &leaves)?.is_none() {
            return Ok(runs);
        }
        runs += 1;
        for (j, &k) in kinds.iter().enumerate() {
            let members = profile.kinds[k].members.clone();
            let mut replays: Vec<Vec<i64>> = Vec::new();
            for &c in &variants[j] {
                let mut choices = whole.clone();
                for &m in &members {
                    choices[m] = c;
                }
                let Some(step) = replay_step(forward, table(&choices), &leaves)? else {
                    return Ok(runs);
                };
                runs += 1;
                let of = |m: usize| {
                    step.replays
                        .get(&profile.layers[m])
                        .copied()
                        .unwrap_or_default() as i64
                };
                replays.push(members.iter().map(|&m| of(m)).collect());
            }
            samples[j][0].extend(&replays[0]);
            for v in 1..replays.len() {
                let d = replays[v].iter().zip(&replays[0]).map(|(a, b)| a - b);
                samples[j][v].extend(d);
            }
        }
    }
    let estimate = |s: &[i64]| Estimate::from_samples(s).widened(MODEL_ERROR);
    for (j, &k) in kinds.iter().enumerate() {
        let kind = &mut profile.kinds[k];
        kind.checkpoint_cost = estimate(&samples[j][0]);
        kind.region_cost = samples[j][1..].iter().map(|s| estimate(s)).collect();
        kind.replay_measured = true;
    }
    Ok(runs)
}

type Structure = (Vec<String>, Vec<LayerKind>, Vec<usize>);

/// The planned checkpoints of one forward, grouped into kinds.
fn structure(calls: &[CheckpointCall], offload: bool) -> Result<Structure> {
    let mut layers: Vec<String> = Vec::new();
    let mut kinds: Vec<LayerKind> = Vec::new();
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
        let k = kinds.iter().position(|k| {
            k.regions == regions && k.can_disable == call.auto && k.input_sizes == call.input_sizes
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
}

#[cfg(test)]
mod tests {
    use super::{finish_kind, structure, tail_ns, time_kind};
    use crate::checkpointing::policy::Policy;
    use crate::diagnostics::timing::{CheckpointCall, RegionCall};
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

    #[test]
    // docs/semantics.md, rule C17: a forward time holds the tail an
    // early-stopped replay skips, so it is taken off; measured steps already
    // skipped it, so it is not taken off twice.
    fn the_tail_comes_off_forward_times_only() {
        let call = CheckpointCall {
            name: Some("layers.0".into()),
            ..call(true)
        };
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
        let call = CheckpointCall {
            name: Some("layers.0".into()),
            ..call(true)
        };
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
        let mut profile = Profile {
            baseline_bytes: 0,
            layers,
            layer_kind,
            kinds,
            runs: 0,
            copy: None,
        };
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
