//! The planned run (`--budget`): profile one step of the model under
//! `ModelPolicy::Auto` on the first batch, plan for the budget, print the
//! plan and write it to `<out>/plan.json`; then measure, on the same batch
//! under the plan, the bytes the planner predicted.
//!
//! Invariant: the planner's count (`measure_kept_bytes`: checkpoints' saves,
//! the inputs they keep for replay, saves outside them) is what the budget
//! bounds, what `predicted` is compared with, and the table's count. The
//! step profiled is training's own forward, autocast scope included: under
//! bf16 autocast the saves differ from fp32's (bf16 activations, bf16 copies
//! of the weights), so a profile taken in fp32 predicts bytes the training
//! forward does not keep, and `--check` fails.

use crate::format::human_ms;
use crate::options::Options;
use crate::protocol::PlanNumbers;
use remat::diagnostics::human_bytes;
use remat::planner::{self, measure_kept_bytes, Plan};
use std::time::Instant;
use tch::Tensor;

/// A plan for the run.
pub struct Planned {
    pub plan: Plan,
}

/// Profiles one step of `forward` (training's forward of the first batch
/// under `ModelPolicy::Auto`, with no plan yet), plans for `opts`' budget
/// (the planner's error, stating the least possible, when it is too small),
/// prints the plan on stderr and writes it to `<out>/plan.json`.
///
/// `gathered` gives, after profiling, the bytes of sharded parameters
/// gathered during a backward (0 unless `--fsdp`), which every predicted
/// peak counts (docs/semantics.md, rule F9).
pub fn plan(
    opts: &Options,
    forward: impl FnMut() -> Tensor,
    gathered: impl FnOnce() -> i64,
) -> Result<Planned, String> {
    let budget = opts.budget()?;
    let started = Instant::now();
    let mut profile = planner::profile(forward).map_err(|e| format!("profiling the model: {e}"))?;
    profile.gathered_bytes = gathered();
    let profiled = started.elapsed();
    let plan = if opts.peak {
        Plan::for_peak_budget(&profile, budget)
    } else {
        Plan::for_budget(&profile, budget)
    }
    .map_err(|e| e.to_string())?;
    let path = opts.out.join("plan.json");
    plan.save_file(&path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!(
        "auto: profiled one step ({} forwards, {:.2} s); {plan}auto: plan written to {}",
        profile.runs,
        profiled.as_secs_f64(),
        path.display()
    );
    Ok(Planned { plan })
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
            predicted_peak: self.plan.predicted.peak_bytes,
            replay_ns: self.plan.predicted.replay_ns,
            measured_kept,
        }
    }
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
    let mut s = format!(
        "auto: bytes saved for backward after the first batch's forward (what the budget \
         bounds, the table's count): predicted {}, measured {} ({}), in the table {} ({})\n\
         auto: predicted peak during backward {}; replay predicted {} a step",
        human_bytes(p.predicted_kept),
        human_bytes(p.measured_kept),
        verdict(p.predicted_kept, p.measured_kept),
        human_bytes(measured_total),
        verdict(p.predicted_kept, measured_total),
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
            predicted_peak: 5 << 20,
            replay_ns: 2_000_000,
            measured_kept,
        }
    }

    #[test]
    fn the_report_sets_prediction_and_measures_side_by_side() {
        let s = report(&numbers(3 << 20), 12_000_000, Some(10_000_000), 3 << 20);
        let bytes = s.lines().next().unwrap();
        assert!(
            bytes.contains(
                "predicted 3.00 MiB, measured 3.00 MiB (equal), in the table 3.00 MiB (equal)"
            ),
            "{s}"
        );
        assert!(
            s.contains("replay predicted 2.00 ms a step, measured +2.00 ms"),
            "{s}"
        );
    }

    #[test]
    fn a_wrong_prediction_is_named() {
        let s = report(&numbers((3 << 20) + 4), 12_000_000, None, 3 << 20);
        let bytes = s.lines().next().unwrap();
        assert!(
            bytes.contains("(DIFFERENT), in the table 3.00 MiB (equal)"),
            "{s}"
        );
        assert!(s.contains("train `none` too"), "{s}");
    }
}
