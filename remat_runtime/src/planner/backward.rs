//! The memory a backward needs, by where it is: measured on the profile's
//! baseline and on each choice of each kind, it is what the predicted peak
//! of every plan is made of (docs/planner.md, "Peak during backward").
//!
//! The backward runs the layers in reverse. While it is inside planned
//! checkpoint `i`, what the later layers kept is freed and what the earlier
//! ones kept is alive. So a plan's bytes in use there are the baseline's,
//! measured, plus what the plan keeps more than the baseline in the layers
//! before `i`, plus what layer `i`'s own choice changes there (what it
//! keeps, what its replay rebuilds and what that replay allocates on the
//! way: [`ChoiceCost::level_delta`], measured on the kind's first member);
//! and the same between layers, without the last term. Gradients in flight
//! (the residual stream's, a skip connection's held until the backward
//! reaches its source, a node's own) are the same under every plan and are
//! in the measured levels.
//!
//! Invariant: levels are bytes over the device's bytes in use before the
//! forward, in steady state (parameters' gradients exist and are added
//! into, as from the second training step on).

use crate::bridge::{bytes_in_use, traced_backward};
use crate::checkpointing::auto;
use crate::error::Result;
use crate::planner::cost::{BackwardLevels, ChoiceCost, Profile};
use crate::recorders::timing::{record_into, ProfileSink};
use crate::sync::lock;
use std::borrow::Cow;
use std::sync::Arc;
use tch::Tensor;

/// How far the peak measured during a plan's backward may be from its
/// predicted peak (`Prediction::peak_bytes`), either way: 64 KiB plus 3%
/// of the prediction (docs/planner.md, "The peak contract"). The peak is
/// measured as the most bytes in use at the backward's node boundaries
/// (`diagnostics::backward_heap_peak` on the CPU), over those in use before
/// the forward, with the parameters' gradients already allocated.
///
/// ```
/// use remat_runtime::planner::peak_tolerance;
/// assert_eq!(peak_tolerance(0), 64 << 10);
/// assert_eq!(peak_tolerance(100 << 20), (64 << 10) + 3 * (1 << 20));
/// ```
pub fn peak_tolerance(predicted_peak: i64) -> i64 {
    (64 << 10) + predicted_peak.max(0) * 3 / 100
}

/// The levels a prediction starts from: the profile's measured ones, or
/// where the device does not say its bytes (or a synthetic profile has
/// none), an upper estimate from the kept bytes alone: everything the
/// baseline keeps is alive throughout, and inside a checkpoint its replay's
/// working set on top.
pub(crate) fn levels_of(profile: &Profile) -> Cow<'_, BackwardLevels> {
    if let Some(measured) = &profile.backward {
        return Cow::Borrowed(measured);
    }
    let layers = (0..profile.layers.len())
        .map(|i| {
            let kind = &profile.kinds[profile.layer_kind[i]];
            let base = &kind.choices[Profile::baseline_index(kind)];
            Some(profile.baseline_bytes + base.working_set)
        })
        .collect();
    Cow::Owned(BackwardLevels {
        layers,
        gaps: vec![Some(profile.baseline_bytes); profile.layers.len() + 1],
    })
}

/// A choice's [`ChoiceCost::level_delta`] from the kept bytes alone, for a
/// profile whose device does not say its bytes in use: what it keeps and
/// what its replay rebuilds against the baseline choice's (0 where both add
/// up to what the block keeps whole).
pub(crate) fn structural_delta(c: &ChoiceCost, base: &ChoiceCost) -> i64 {
    c.bytes + c.working_set - base.working_set
}

/// Where a node ran: inside planned checkpoint `i`, or in gap `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    Layer(usize),
    Gap(usize),
}

/// Which position a node made with sequence number `seq` belongs to, given
/// each planned checkpoint's node range in forward order: the innermost
/// (latest-starting) range holding it, else the gap after the ranges that
/// ended before it.
fn position(ranges: &[(i64, i64)], seq: i64) -> Position {
    if let Some(i) = (0..ranges.len())
        .rev()
        .find(|&i| ranges[i].0 <= seq && seq < ranges[i].1)
    {
        return Position::Layer(i);
    }
    Position::Gap(ranges.iter().filter(|r| r.1 <= seq).count())
}

/// The levels of a trace: `samples` as `(sequence number, bytes over the
/// level before the forward)`, a sample without a number counted where the
/// one before it was (the first where the backward starts: after the last
/// layer).
fn levels(ranges: &[(i64, i64)], samples: &[(i64, i64)]) -> BackwardLevels {
    let mut out = BackwardLevels {
        layers: vec![None; ranges.len()],
        gaps: vec![None; ranges.len() + 1],
    };
    let mut at = Position::Gap(ranges.len());
    for &(seq, bytes) in samples {
        if seq >= 0 {
            at = position(ranges, seq);
        }
        let slot = match at {
            Position::Layer(i) => &mut out.layers[i],
            Position::Gap(i) => &mut out.gaps[i],
        };
        *slot = Some(slot.map_or(bytes, |s| s.max(bytes)));
    }
    out
}

/// How many traced steps the profile takes: the levels are the least of
/// each, since what a process allocates once and keeps (a first use of
/// some kernel, a cache) lands in one step, not in both.
pub(crate) const TRACED_STEPS: usize = 2;

/// The baseline's levels, the least of [`TRACED_STEPS`] traced steps
/// ([`trace`]); `None` as for one.
pub(crate) fn measure(
    forward: &mut impl FnMut() -> Tensor,
    layers: &[String],
) -> Result<Option<BackwardLevels>> {
    let mut least: Option<BackwardLevels> = None;
    for _ in 0..TRACED_STEPS {
        let Some(levels) = trace(forward, layers)? else {
            return Ok(None);
        };
        least = Some(match least {
            None => levels,
            Some(l) => l.least(&levels),
        });
    }
    Ok(least)
}

/// Measures each kind's choices' [`ChoiceCost::level_delta`] on its first
/// member, against the profile's measured baseline levels: one traced step
/// per choice but the baseline, with only that member changed. Returns how
/// many steps it took (none where the baseline's levels are not measured).
pub(crate) fn measure_choices(
    profile: &mut Profile,
    forward: &mut impl FnMut() -> Tensor,
) -> Result<usize> {
    let Some(base_levels) = profile.backward.clone() else {
        return Ok(0);
    };
    let mut runs = 0;
    for (k, c, choices) in profile.one_changed() {
        let rep = profile.kinds[k].members[0];
        let Some(base_level) = base_levels.layers[rep] else {
            continue;
        };
        let table = profile.table("the profiler's plan".into(), &choices);
        let levels = {
            let _plan = auto::push(Some(Arc::new(table)));
            trace(forward, &profile.layers)?
        };
        runs += 1;
        if let Some(level) = levels.and_then(|l| l.layers[rep]) {
            profile.kinds[k].choices[c].level_delta = level - base_level;
        }
    }
    Ok(runs)
}

/// Runs `forward` and its backward with every node sampling the bytes in
/// use on the loss's device, and returns the most bytes in use at each
/// point of the backward, as [`BackwardLevels`] by `profile`'s planned
/// checkpoints (named calls, checkpointed or run as plain code): the
/// measured counterpart of [`predict_levels`], for telling where a plan's
/// predicted peak and its measured one part. Gradients are computed and
/// dropped as a step would add them into `.grad` (which is untouched).
/// `None` where the device does not say its bytes in use (not glibc, or
/// CUDA without the caching allocator's counters), the loss needs no
/// gradient, or a planned checkpoint did not run.
///
/// ```
/// use remat_runtime::{checkpoint, planner, region, Policy};
/// let w = tch::Tensor::ones([64, 64], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let forward = || {
///     let w = w.shallow_clone();
///     checkpoint("layers.0").auto().call(&w, |w| {
///         let h = region("exp", Policy::Auto).call(&w, |w| (w * 2).exp());
///         remat_runtime::recompute_needs_tensor(&h);
///         h.sin().sum(tch::Kind::Float)
///     })
/// };
/// let profile = planner::profile_with(forward, 1).unwrap();
/// if let Some(levels) = planner::measure_levels(&profile, forward).unwrap() {
///     // The replay of the checkpoint rebuilt `exp`'s 16 KiB result.
///     assert!(levels.layers[0].unwrap() >= 16 << 10);
/// }
/// ```
pub fn measure_levels(
    profile: &Profile,
    mut forward: impl FnMut() -> Tensor,
) -> Result<Option<BackwardLevels>> {
    trace(&mut forward, &profile.layers)
}

/// What [`measure_levels`] measures, as the profile predicts it for one
/// choice index per layer: the baseline's levels plus, at each point, what
/// the plan keeps more than the baseline in the layers the backward has
/// not reached yet. The most of them, with the profile's gathered bytes,
/// is the predicted peak.
///
/// ```no_run
/// # fn f(profile: &remat_runtime::planner::Profile, choices: &[usize]) {
/// use remat_runtime::planner::{predict, predict_levels};
/// let most = predict_levels(profile, choices).most();
/// assert_eq!(most + profile.gathered_bytes, predict(profile, choices).peak_bytes);
/// # }
/// ```
pub fn predict_levels(profile: &Profile, choices: &[usize]) -> BackwardLevels {
    let levels = levels_of(profile);
    let mut out = BackwardLevels {
        layers: Vec::with_capacity(choices.len()),
        gaps: Vec::with_capacity(choices.len() + 1),
    };
    let mut over = 0;
    for (i, &c) in choices.iter().enumerate() {
        let c = &profile.kinds[profile.layer_kind[i]].choices[c];
        // The backward reaches layer i after the later ones freed theirs:
        // of the plan's extra, only the layers before i are still alive.
        out.gaps.push(levels.gaps[i].map(|l| l + over));
        out.layers
            .push(levels.layers[i].map(|l| l + c.level_delta + over));
        over += c.bytes;
    }
    out.gaps.push(levels.gaps[choices.len()].map(|l| l + over));
    out
}

/// Runs `forward` once and its backward with every node sampling the bytes
/// in use, and sorts the samples by the planned checkpoint (`layers`, by
/// name) whose forward made the node. `None` where the device does not
/// say its bytes in use, the loss needs no gradient, or a planned
/// checkpoint did not run.
fn trace(
    forward: &mut impl FnMut() -> Tensor,
    layers: &[String],
) -> Result<Option<BackwardLevels>> {
    // The device is the loss's, known after the forward: the bytes in use
    // before it are read on the CPU's heap and every CUDA device alike.
    let before_heap = bytes_in_use(tch::Device::Cpu);
    let before_cuda: Vec<Option<i64>> = (0..tch::Cuda::device_count())
        .map(|i| bytes_in_use(tch::Device::Cuda(i as usize)))
        .collect();
    let sink = Arc::new(ProfileSink::default());
    let loss = {
        let _sink = record_into(sink.clone());
        forward()
    };
    let before = match loss.device() {
        tch::Device::Cuda(i) => before_cuda.get(i).copied().flatten(),
        _ => before_heap,
    };
    let Some(before) = before else {
        return Ok(None);
    };
    if !loss.requires_grad() {
        return Ok(None);
    }
    let ranges: Option<Vec<(i64, i64)>> = {
        let calls = lock(&sink.calls);
        let plain = lock(&sink.plain);
        layers
            .iter()
            .map(|name| {
                let checkpointed = calls.iter().find_map(|c| {
                    let c = lock(c);
                    (c.checkpointed && c.name.as_deref() == Some(name.as_str())).then_some(c.nodes)
                });
                checkpointed.or_else(|| plain.iter().find(|(n, _)| n == name).map(|(_, r)| *r))
            })
            .collect()
    };
    let Some(samples) = traced_backward(&loss)? else {
        return Ok(None);
    };
    let Some(ranges) = ranges else {
        return Ok(None);
    };
    // The engine's own tables for a backward that asks for gradients (which
    // nodes to run, where to capture) are a little larger than a plain
    // backward's: an overestimate of a few bytes per node, kept.
    let over: Vec<(i64, i64)> = samples.iter().map(|&(s, b)| (s, b - before)).collect();
    Ok(Some(levels(&ranges, &over)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_go_to_the_checkpoint_that_made_their_node_or_the_gap_around_it() {
        // Checkpoints made nodes 10..20 and 25..30; 20..25 is between them.
        let ranges = [(10, 20), (25, 30)];
        assert_eq!(position(&ranges, 5), Position::Gap(0));
        assert_eq!(position(&ranges, 12), Position::Layer(0));
        assert_eq!(position(&ranges, 22), Position::Gap(1));
        assert_eq!(position(&ranges, 29), Position::Layer(1));
        assert_eq!(position(&ranges, 31), Position::Gap(2));
        // A range nested in another: the inner one.
        assert_eq!(position(&[(0, 10), (2, 4)], 3), Position::Layer(1));
    }

    #[test]
    fn a_sample_without_a_number_counts_where_the_one_before_it_was() {
        let ranges = [(10, 20)];
        let samples = [(-1, 7), (25, 50), (15, 80), (-1, 90), (3, 20)];
        let l = levels(&ranges, &samples);
        assert_eq!(l.layers, [Some(90)]);
        assert_eq!(l.gaps, [Some(20), Some(50)]);
        assert_eq!(l.most(), 90);
        // Nothing ran between two checkpoints: no level there.
        let l = levels(&[(10, 20), (20, 30)], &[(25, 5), (15, 7)]);
        assert_eq!(l.gaps, [None, None, None]);
        assert_eq!(l.layers, [Some(7), Some(5)]);
    }
}
