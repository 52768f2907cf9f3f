//! The end-of-run table (one row per policy) and the check that every
//! policy's loss curve equals the first one's.
//!
//! Invariant: every number comes from a child's own measurement; nothing is
//! derived but the median and the ratio to `none`.

use crate::format::{human_bytes, human_ms};
use crate::options::policy_name;
use crate::protocol::RunResult;
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
        "{:<10} {:>10} {:>10} {:>12} {:>8} {:>19} {:>14}",
        "policy",
        "train loss",
        "val loss",
        "median step",
        "vs none",
        "saved for backward",
        "peak resident"
    );
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
            "{:<10} {train:>10} {val:>10} {:>12} {ratio:>8} {:>19} {rss:>14}",
            policy_name(r.policy),
            human_ms(median),
            human_bytes(r.saved_total),
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
