//! Section 4's checks of the profile itself: whether three profiles of one
//! model in one process give the same plans, and how the time model's
//! prediction for an assignment compares with the step time it adds over
//! `none`, measured in interleaved rounds.

use crate::stats::{summary, Summary};
use crate::variant::{plan_label, Variant};
use remat::planner::{self, Choice, Plan, Profile};
use remat_reference::model::ModelPolicy;

/// One budget and the plan each profile gives there.
pub struct Agreement {
    pub budget: i64,
    pub labels: Vec<String>,
}

impl Agreement {
    pub fn agrees(&self) -> bool {
        self.labels.windows(2).all(|w| w[0] == w[1])
    }
}

/// The plan of every profile at every budget.
pub fn agreement(profiles: &[Profile], budgets: &[i64]) -> Result<Vec<Agreement>, String> {
    budgets
        .iter()
        .map(|&budget| {
            let labels = profiles
                .iter()
                .map(|p| {
                    Plan::for_budget(p, budget)
                        .map(|plan| plan_label(&plan))
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<_, _>>()?;
            Ok(Agreement { budget, labels })
        })
        .collect()
}

/// A profile's costs on one line: the checkpoint and each region, with
/// spreads (the kinds of the reference model: one).
pub fn costs_line(p: &Profile) -> String {
    p.kinds
        .iter()
        .map(|k| {
            let regions: Vec<String> = k
                .regions
                .iter()
                .zip(&k.region_cost)
                .map(|(r, c)| format!("{r} {c}"))
                .collect();
            format!(
                "checkpoint {}; recompute {}",
                k.checkpoint_cost,
                regions.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The choice index of a hand policy's block in `p`'s (only) kind.
pub fn hand_choices(p: &Profile, policy: ModelPolicy) -> Option<Vec<usize>> {
    let save = |attention, mlp| Choice {
        checkpointed: true,
        save: vec![attention, mlp],
        offload: vec![false; 2],
    };
    let want = match policy {
        ModelPolicy::None => Choice::whole(2),
        ModelPolicy::Full => save(false, false),
        ModelPolicy::Selective => save(true, false),
        ModelPolicy::SaveMlp => save(false, true),
        ModelPolicy::Auto => return None,
    };
    let kind = p.kinds.first()?;
    let c = kind.choices.iter().position(|c| c.choice == want)?;
    Some(vec![c; p.layers.len()])
}

/// The measured step time a variant adds over `none`, per round.
pub fn extra_over(v: &Variant, none: &Variant) -> Summary {
    let d: Vec<f64> = v
        .times
        .iter()
        .zip(&none.times)
        .map(|(a, b)| a - b)
        .collect();
    summary(&d)
}

/// A hand policy's predicted replay and spread (seconds) by each of
/// `profiles`, the median of them by replay time (with its own spread).
pub fn median_prediction(profiles: &[Profile], policy: ModelPolicy) -> Option<(f64, f64)> {
    let mut predictions: Vec<(f64, f64)> = profiles
        .iter()
        .map(|p| {
            let c = hand_choices(p, policy)?;
            let predicted = planner::predict(p, &c);
            Some((
                predicted.replay_ns as f64 / 1e9,
                predicted.spread_ns as f64 / 1e9,
            ))
        })
        .collect::<Option<_>>()?;
    predictions.sort_by(|a, b| a.0.total_cmp(&b.0));
    predictions.get(predictions.len() / 2).copied()
}
