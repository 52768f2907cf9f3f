//! The end-of-run table (one row per policy) and the check that every
//! policy's loss curve equals the first one's.
//!
//! Invariant: every number comes from a child's own measurement; nothing is
//! derived but the median and the ratio to `none`.

use crate::format::human_ms;
use crate::options::policy_name;
use crate::protocol::RunResult;
use remat::diagnostics::human_bytes;
use remat_reference::model::ModelPolicy;
use std::fmt::Write;

/// The table, as printed and written to `table.txt`.
pub fn table(results: &[RunResult]) -> String {
    let base = results
        .iter()
        .find(|r| r.policy == ModelPolicy::None)
        .map(RunResult::median_step_ns);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:>10} {:>10} {:>12} {:>8} {:>19} {:>11} {:>14}",
        "policy",
        "train loss",
        "val loss",
        "median step",
        "vs none",
        "saved for backward",
        "offloaded",
        "peak resident"
    );
    // Only a CUDA run has allocator numbers: a CPU table stays as it was.
    let device = results.iter().any(|r| r.device_peak.is_some());
    if device {
        s.pop();
        let _ = writeln!(s, " {:>14}", "peak allocated");
    }
    for r in results {
        let (train, val) = r
            .evals
            .last()
            .map(|&(_, t, v)| (format!("{t:.4}"), format!("{v:.4}")))
            .unwrap_or_else(|| ("-".into(), "-".into()));
        let median = r.median_step_ns();
        let ratio = base
            .filter(|&b| b > 0)
            .map(|b| format!("{:.2}x", median as f64 / b as f64))
            .unwrap_or_else(|| "-".into());
        let rss = r
            .peak_rss
            .map(|b| human_bytes(b as i64))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "{:<10} {train:>10} {val:>10} {:>12} {ratio:>8} {:>19} {:>11} {rss:>14}",
            policy_name(r.policy),
            human_ms(median),
            human_bytes(r.saved_total),
            human_bytes(r.offloaded),
        );
        if device {
            s.pop();
            let peak = r.device_peak.map(human_bytes).unwrap_or_else(|| "-".into());
            let _ = writeln!(s, " {peak:>14}");
        }
    }
    s
}

/// The table's numbers for scripts (the GPU kit's results file), one
/// tab-separated line per policy after a header: the median step and the
/// bytes in bytes and nanoseconds, `-` where a run has no such number.
pub fn summary(results: &[RunResult]) -> String {
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let mut s = String::from(
        "policy\tmedian_step_ns\tsaved_for_backward\tpeak_rss\tdevice_peak\t\
         predicted_kept\tmeasured_kept\tpredicted_peak\tlast_loss\n",
    );
    for r in results {
        let plan = r.plan.as_ref();
        let _ = writeln!(
            s,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            policy_name(r.policy),
            r.median_step_ns(),
            r.saved_total,
            dash(r.peak_rss.map(|b| b.to_string())),
            dash(r.device_peak.map(|b| b.to_string())),
            dash(plan.map(|p| p.predicted_kept.to_string())),
            dash(plan.map(|p| p.measured_kept.to_string())),
            dash(plan.map(|p| p.predicted_peak.to_string())),
            dash(r.step_loss.last().map(|l| l.to_string())),
        );
    }
    s
}

/// `Ok` with a sentence when every run reported `steps` losses, each equal
/// to the first run's bit for bit, else `Err` naming what differs.
pub fn losses_agree(results: &[RunResult], steps: usize) -> Result<String, String> {
    let Some(first) = results.first() else {
        return Err("no run".into());
    };
    for r in results {
        if r.step_loss.len() != steps {
            return Err(format!(
                "{} reported {} of the {steps} steps",
                policy_name(r.policy),
                r.step_loss.len()
            ));
        }
        let differs = first
            .step_loss
            .iter()
            .zip(&r.step_loss)
            .position(|(a, b)| a.to_bits() != b.to_bits());
        if let Some(i) = differs {
            return Err(format!(
                "the losses differ at step {}: {} {} vs {} {}",
                i + 1,
                policy_name(first.policy),
                first.step_loss[i],
                policy_name(r.policy),
                r.step_loss[i]
            ));
        }
    }
    Ok(format!(
        "the training losses of all {} policies are bitwise equal at each of the {} steps",
        results.len(),
        first.step_loss.len()
    ))
}

/// Growth of the peak resident memory after the first tenth of the steps
/// that still counts as flat (allocator noise; a leak of the small model's
/// graph would grow by about 1 MiB a step).
const FLAT_TOLERANCE: u64 = 32 << 20;

/// Whether every run's memory stayed flat: its peak after the first tenth
/// of the steps is its peak at the end, within `FLAT_TOLERANCE`.
pub fn memory_flat(results: &[RunResult]) -> Result<String, String> {
    let mut growths = Vec::new();
    for r in results {
        let (Some(early), Some(end)) = (r.early_peak_rss, r.peak_rss) else {
            return Ok("(no /proc: memory growth not measured)".into());
        };
        let growth = end.saturating_sub(early);
        if growth > FLAT_TOLERANCE {
            return Err(format!(
                "{}: the peak resident memory grew by {} after the first tenth of the steps",
                policy_name(r.policy),
                human_bytes(growth as i64)
            ));
        }
        growths.push(format!(
            "{} +{}",
            policy_name(r.policy),
            human_bytes(growth as i64)
        ));
    }
    Ok(format!(
        "memory is flat: peak growth after the first tenth of the steps: {}",
        growths.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{parse, Emit};

    /// A run as the child reports it, through the line protocol.
    fn run(policy: ModelPolicy, losses: &[f64]) -> RunResult {
        let mut out = Vec::new();
        let mut emit = Emit(&mut out);
        emit.saved(300, 100, 50, &[("layers.0".into(), 200)]);
        for &l in losses {
            emit.step(l, 1_000);
        }
        emit.eval(losses.len(), 2.5, 2.75);
        parse(policy, &String::from_utf8(out).unwrap()).unwrap()
    }

    #[test]
    fn equal_losses_agree_and_reach_the_table() {
        let losses = [5.5, 0.1 + 0.2, 1.0 / 3.0];
        let runs = [
            run(ModelPolicy::None, &losses),
            run(ModelPolicy::Full, &losses),
        ];
        assert_eq!(runs[1].saved_layers, [("layers.0".to_string(), 200)]);
        assert_eq!(runs[1].offloaded, 50);
        assert!(losses_agree(&runs, 3).unwrap().contains("bitwise equal"));
        let table = table(&runs);
        assert!(
            table.contains("full           2.5000     2.7500"),
            "{table}"
        );
    }

    #[test]
    fn a_cuda_run_adds_the_allocator_peak_to_the_table_and_the_summary() {
        let losses = [5.5, 1.0 / 3.0];
        let mut cuda = run(ModelPolicy::Full, &losses);
        let cpu = table(std::slice::from_ref(&cuda));
        assert!(!cpu.contains("peak allocated"), "{cpu}");
        cuda.device_peak = Some(3 << 20);
        let with = table(std::slice::from_ref(&cuda));
        assert!(
            with.lines().next().unwrap().ends_with("peak allocated"),
            "{with}"
        );
        assert!(with.lines().nth(1).unwrap().ends_with("3.00 MiB"), "{with}");
        let tsv = summary(&[cuda]);
        let row: Vec<&str> = tsv.lines().nth(1).unwrap().split('\t').collect();
        assert_eq!(row[..5], ["full", "1000", "300", "-", "3145728"]);
        assert_eq!(row[8], (1.0f64 / 3.0).to_string());
    }

    #[test]
    fn a_loss_one_ulp_off_is_named_with_its_step() {
        let a: [f64; 3] = [5.5, 0.1 + 0.2, 1.0 / 3.0];
        let mut b = a;
        b[1] = f64::from_bits(b[1].to_bits() + 1);
        let runs = [run(ModelPolicy::None, &a), run(ModelPolicy::Selective, &b)];
        let err = losses_agree(&runs, 3).unwrap_err();
        assert!(err.starts_with("the losses differ at step 2:"), "{err}");
    }

    #[test]
    fn the_planned_runs_numbers_come_through_the_protocol() {
        let plan = crate::protocol::PlanNumbers {
            predicted_kept: 1000,
            predicted_peak: 3000,
            replay_ns: 5,
            measured_kept: 1000,
        };
        let mut out = Vec::new();
        Emit(&mut out).plan(&plan);
        let r = parse(ModelPolicy::Auto, &String::from_utf8(out).unwrap()).unwrap();
        assert_eq!(r.plan, Some(plan));
        assert!(table(&[r]).contains("\nauto "));
    }

    #[test]
    fn a_run_with_missing_steps_does_not_agree() {
        let runs = [run(ModelPolicy::None, &[1.0, 2.0])];
        assert_eq!(
            losses_agree(&runs, 3).unwrap_err(),
            "none reported 2 of the 3 steps"
        );
    }
}
