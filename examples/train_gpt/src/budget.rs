//! The planned run (`--budget`): profile one step of the model under
//! `ModelPolicy::Auto` on the first batch, plan for the budget, print the
//! plan and write it to `<out>/plan.json`; then measure, on the same batch
//! under the plan, the bytes the planner predicted.
//!
//! Invariant: the planner's count (`measure_kept_bytes`: checkpoints' saves
//! plus saves outside them) is what the budget bounds and what `predicted`
//! is compared with; the table's count adds the inputs checkpoints keep for
//! replay, predicted here from the profile (`LayerKind::input_bytes` of each
//! block the plan checkpoints).

use crate::format::{human_bytes, human_ms};
use crate::options::Options;
use crate::protocol::PlanNumbers;
use remat::planner::{self, measure_kept_bytes, Plan, Profile};
use remat_reference::model::{Model, ModelPolicy};
use std::time::Instant;
use tch::Tensor;

/// A plan with what the table's count adds to its prediction.
pub struct Planned {
    pub plan: Plan,
    /// Inputs kept for replay by the blocks the plan checkpoints, bytes.
    pub predicted_inputs: i64,
}

/// Profiles one step on `(x, y)`, plans for `opts`' budget (the planner's
/// error, stating the least possible, when it is too small), prints the
/// plan on stderr and writes it to `<out>/plan.json`.
pub fn plan(opts: &Options, model: &Model, x: &Tensor, y: &Tensor) -> Result<Planned, String> {
    let budget = opts.budget()?;
    let started = Instant::now();
    let profile = planner::profile(|| model.loss(x, y, ModelPolicy::Auto))
        .map_err(|e| format!("profiling the model: {e}"))?;
    let profiled = started.elapsed();
    let plan = if opts.peak {
        Plan::for_peak_budget(&profile, budget)
    } else {
        Plan::for_budget(&profile, budget)
    }
    .map_err(|e| e.to_string())?;
    let path = opts.out.join("plan.json");
    plan.save(&path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!(
        "auto: profiled one step ({} forwards, {:.2} s); {plan}auto: plan written to {}",
        profile.runs,
        profiled.as_secs_f64(),
        path.display()
    );
    let predicted_inputs = checkpoint_inputs(&profile, &plan);
    Ok(Planned {
        plan,
        predicted_inputs,
    })
}

impl Planned {
    /// The prediction and the planner's own measure of `forward` (the first
    /// batch under the plan); leaves no graph behind.
    pub fn measure(&self, forward: impl FnOnce() -> Tensor) -> PlanNumbers {
        let (loss, measured_kept) = measure_kept_bytes(forward);
        // The gradients this leaves are zeroed before the first step.
        loss.backward();
        PlanNumbers {
            predicted_kept: self.plan.predicted.kept_bytes,
            predicted_inputs: self.predicted_inputs,
            predicted_peak: self.plan.predicted.peak_bytes,
            replay_ns: self.plan.predicted.replay_ns,
            measured_kept,
        }
    }
}

/// Bytes of the inputs the plan's checkpointed blocks keep for replay.
fn checkpoint_inputs(profile: &Profile, plan: &Plan) -> i64 {
    plan.layers
        .iter()
        .filter(|l| l.choice.checkpointed)
        .filter_map(|l| profile.kind_of(&l.name))
        .map(|k| k.input_bytes)
        .sum()
}

/// The parent's lines on the planned run: predicted against measured bytes
/// (both counts) and step time. `none_step_ns` is `none`'s median step
/// when that run was trained too.
pub fn report(
    p: &PlanNumbers,
    median_step_ns: u64,
    none_step_ns: Option<u64>,
    measured_total: i64,
) -> String {
    let verdict = |a: i64, b: i64| if a == b { "equal" } else { "DIFFERENT" };
    let predicted_total = p.predicted_kept + p.predicted_inputs;
    let measured_inputs = measured_total - p.measured_kept;
    let mut s = format!(
        "auto: bytes saved for backward after the first batch's forward, predicted vs measured:\n\
         \x20 the planner's count (what the budget bounds)  {:>10} {:>10}  {}\n\
         \x20 + inputs checkpoints keep for replay          {:>10} {:>10}  {}\n\
         \x20 = the table's count                           {:>10} {:>10}  {}\n\
         \x20 (the planner's count leaves out checkpoint inputs; the table counts them, as for every row)\n\
         auto: predicted peak during backward {}; replay predicted {} a step",
        human_bytes(p.predicted_kept),
        human_bytes(p.measured_kept),
        verdict(p.predicted_kept, p.measured_kept),
        human_bytes(p.predicted_inputs),
        human_bytes(measured_inputs),
        verdict(p.predicted_inputs, measured_inputs),
        human_bytes(predicted_total),
        human_bytes(measured_total),
        verdict(predicted_total, measured_total),
        human_bytes(p.predicted_peak),
        human_ms(p.replay_ns),
    );
    match none_step_ns {
        Some(none) => s.push_str(&format!(
            ", measured {} over none's median step ({} against {})",
            signed_ms(median_step_ns as i64 - none as i64),
            human_ms(median_step_ns),
            human_ms(none)
        )),
        None => s.push_str(&format!(
            "; measured median step {} (train `none` too for the overhead)",
            human_ms(median_step_ns)
        )),
    }
    s
}

fn signed_ms(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "+" };
    format!("{sign}{}", human_ms(ns.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(measured_kept: i64) -> PlanNumbers {
        PlanNumbers {
            predicted_kept: 3 << 20,
            predicted_inputs: 1 << 20,
            predicted_peak: 5 << 20,
            replay_ns: 2_000_000,
            measured_kept,
        }
    }

    #[test]
    fn the_report_sets_both_counts_side_by_side() {
        let s = report(&numbers(3 << 20), 12_000_000, Some(10_000_000), 4 << 20);
        let kept = s.lines().nth(1).unwrap();
        assert!(kept.contains("3.00 MiB   3.00 MiB  equal"), "{s}");
        let table = s.lines().nth(3).unwrap();
        assert!(table.contains("4.00 MiB   4.00 MiB  equal"), "{s}");
        assert!(
            s.contains("replay predicted 2.00 ms a step, measured +2.00 ms"),
            "{s}"
        );
    }

    #[test]
    fn a_wrong_prediction_is_named() {
        let s = report(&numbers((3 << 20) + 4), 12_000_000, None, (4 << 20) + 4);
        assert!(s.lines().nth(1).unwrap().ends_with("DIFFERENT"), "{s}");
        assert!(s.lines().nth(2).unwrap().ends_with("equal"), "{s}");
        assert!(s.contains("train `none` too"), "{s}");
    }
}
