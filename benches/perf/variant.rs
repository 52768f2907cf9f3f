//! A measured variant of the planner's section (a hand policy, or a plan),
//! and how a plan is labelled in the report: what `planner.rs` measures and
//! `accuracy.rs` and `planner_report.rs` read.

use crate::stats::summary;
use remat::planner::Plan;
use remat_reference::model::ModelPolicy;

/// What one variant runs: a hand policy, or the reference model's `Auto`
/// regions under a plan.
#[derive(Clone)]
pub enum Runner {
    Hand(ModelPolicy),
    Plan(Box<Plan>),
}

/// One measured variant.
#[derive(Clone)]
pub struct Variant {
    pub label: String,
    pub runner: Runner,
    /// Bytes kept at the forward→backward point, measured (remat's count).
    pub bytes: i64,
    /// The planner's prediction of those bytes, for plans.
    pub predicted_bytes: Option<i64>,
    /// Predicted replay time of a plan (or of a hand policy's assignment),
    /// seconds.
    pub predicted_replay: Option<f64>,
    /// Its spread, seconds.
    pub predicted_spread: Option<f64>,
    /// Seconds per round (each the least of `reps` steps).
    pub times: Vec<f64>,
}

impl Variant {
    pub fn median(&self) -> f64 {
        summary(&self.times).median
    }
}

/// A short label: per layer `whole` or its regions' S/R, e.g. `SR / whole`.
pub fn plan_label(plan: &Plan) -> String {
    plan.layers
        .iter()
        .map(|l| {
            if l.choice.checkpointed {
                l.choice
                    .save
                    .iter()
                    .map(|&s| if s { 'S' } else { 'R' })
                    .collect()
            } else {
                "whole".to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" / ")
}
