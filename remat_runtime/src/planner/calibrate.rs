//! The profile's calibration of time: what checkpointing a block, and
//! recomputing each of its regions instead of saving it, adds to a step,
//! measured as the checkpoints' replays timed inside the backward of real
//! steps (docs/planner.md, "Measured as replays"; the model of time in
//! `profile`).

use crate::bridge::storage_key;
use crate::checkpointing::auto;
use crate::checkpointing::auto::DecisionTable;
use crate::error::{Error, Result};
use crate::planner::choice::Choice;
use crate::planner::cost::Profile;
use crate::planner::estimate::Estimate;
use crate::recorders::timing::{record_into, ProfileSink};
use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tch::Tensor;

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

/// Measures [`LayerKind::checkpoint_cost`](crate::planner::cost::LayerKind::checkpoint_cost) and [`LayerKind::region_cost`](crate::planner::cost::LayerKind::region_cost)
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
pub(crate) fn calibrate(
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
    let baseline = profile.baseline_choices();
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
