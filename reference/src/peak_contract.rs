//! The planner's peak contract, measured (docs/planner.md, "The peak
//! contract"): for a sweep of budgets from the least a model's plans need
//! to what it keeps with no checkpoint, kept and peak budgets alike, the
//! plan's predicted peak during backward against glibc's heap at every
//! node boundary of that backward, a measure of its own
//! (`diagnostics::backward_heap_peak`). The tests hold each row to the
//! stated tolerance; the bench writes the table into docs/planner.md.

use crate::planned::Planned;
use remat::diagnostics::{backward_heap_peak, heap_bytes_in_use};
use remat::planner::{self, Plan, Profile, Target};
use std::fmt::Write;

/// One plan of a sweep.
#[derive(Clone, Debug)]
pub struct Row {
    /// The model's name.
    pub model: String,
    /// What the budget bounds.
    pub target: Target,
    /// The budget.
    pub budget: i64,
    /// The plan's predicted bytes kept at the forward→backward point.
    pub kept: i64,
    /// The plan's predicted peak during backward.
    pub predicted: i64,
    /// The heap's most bytes in use during the plan's backward, over those
    /// in use before its forward.
    pub measured: i64,
    /// The plan's predicted replay time, ns.
    pub replay_ns: u64,
}

impl Row {
    /// Measured less predicted peak.
    ///
    /// ```
    /// # use remat_reference::peak_contract::Row;
    /// # use remat::planner::Target;
    /// let r = Row { model: "m".into(), target: Target::Peak, budget: 10, kept: 5,
    ///               predicted: 9, measured: 8, replay_ns: 0 };
    /// assert_eq!(r.error(), -1);
    /// ```
    pub fn error(&self) -> i64 {
        self.measured - self.predicted
    }
}

/// The plan with every planned block whole (or, for a kind that cannot be
/// turned off, its first choice): what the model keeps with no checkpoint.
fn none(profile: &Profile) -> Plan {
    Plan::from_choices(profile, &vec![0; profile.layers.len()]).expect("choice 0 of every layer")
}

/// A model's sweep: its profile and one row per plan.
pub struct Sweep {
    /// The profile the plans were made from.
    pub profile: Profile,
    /// Kept budgets, then peak budgets, each rising.
    pub rows: Vec<Row>,
}

/// Profiles `model`, then for `steps + 1` kept budgets and `steps + 1` peak
/// budgets evenly from the least any plan needs to what the plan with
/// every block whole needs, plans it, runs one step under the plan
/// (parameters' gradients existing and zeroed, as in training) and
/// measures the heap during its backward.
/// `Ok(None)` where the heap does not say its bytes (not glibc).
///
/// ```no_run
/// use remat_reference::{peak_contract::sweep, planned::Reference, SMALL};
/// let sweep = sweep(&Reference::new("small", SMALL), 8).unwrap().unwrap();
/// assert_eq!(sweep.rows.len(), 18);
/// ```
pub fn sweep(model: &dyn Planned, steps: i64) -> Result<Option<Sweep>, String> {
    let params = model.parameters();
    // Gradients exist before anything is measured, as after a first step.
    model.loss().backward();
    let profile = planner::profile_with(|| model.loss(), 1).map_err(|e| e.to_string())?;
    let most = none(&profile).predicted;
    let least_kept = Plan::minimum(&profile).predicted.kept_bytes;
    let least_peak = Plan::minimum_peak(&profile).predicted.peak_bytes;
    let mut rows = Vec::new();
    for target in [Target::Kept, Target::Peak] {
        let (least, most) = match target {
            Target::Kept => (least_kept, most.kept_bytes),
            Target::Peak => (least_peak, most.peak_bytes),
        };
        for step in 0..=steps {
            let budget = least + (most - least) * step / steps;
            let plan = match target {
                Target::Kept => Plan::for_budget(&profile, budget),
                Target::Peak => Plan::for_peak_budget(&profile, budget),
            }
            .map_err(|e| e.to_string())?;
            for p in &params {
                let mut g = p.grad();
                if g.defined() {
                    let _ = g.zero_();
                }
            }
            let Some(before) = heap_bytes_in_use() else {
                return Ok(None);
            };
            let loss = plan.scope(|| model.loss());
            let Some(peak) = backward_heap_peak(&loss).map_err(|e| e.to_string())? else {
                return Ok(None);
            };
            rows.push(Row {
                model: model.name(),
                target,
                budget,
                kept: plan.predicted.kept_bytes,
                predicted: plan.predicted.peak_bytes,
                measured: peak as i64 - before as i64,
                replay_ns: plan.predicted.replay_ns,
            });
        }
    }
    Ok(Some(Sweep { profile, rows }))
}

/// Rows as a markdown table (KiB, replay in ms).
///
/// ```
/// # use remat_reference::peak_contract::{table, Row};
/// # use remat::planner::Target;
/// let r = Row { model: "m".into(), target: Target::Kept, budget: 2048, kept: 1024,
///               predicted: 4096, measured: 3072, replay_ns: 1_500_000 };
/// assert!(table(&[r]).contains("| m | kept | 2.0 | 1.0 | 4.0 | 3.0 | -1.0 | 1.5 |"));
/// ```
pub fn table(rows: &[Row]) -> String {
    let kib = |b: i64| format!("{:.1}", b as f64 / 1024.0);
    let mut out = String::from(
        "| model | target | budget KiB | kept KiB | peak predicted KiB | peak measured KiB \
         | measured − predicted KiB | replay ms |\n|---|---|--:|--:|--:|--:|--:|--:|\n",
    );
    for r in rows {
        let target = match r.target {
            Target::Kept => "kept",
            Target::Peak => "peak",
        };
        let _ = writeln!(
            out,
            "| {} | {target} | {} | {} | {} | {} | {} | {:.1} |",
            r.model,
            kib(r.budget),
            kib(r.kept),
            kib(r.predicted),
            kib(r.measured),
            kib(r.error()),
            r.replay_ns as f64 / 1e6
        );
    }
    out
}
