//! Plans are tables: a planner's [`Plan`] as the [`PolicyTable`] that
//! decides exactly as the plan does.
//!
//! Invariant: under the table of a plan, every checkpoint and region the
//! plan names gets the plan's decision; names are escaped, so a name with
//! pattern characters still matches only itself. A checkpoint the plan
//! turns off gets one checkpoint rule and no region rules (its regions do
//! not run as regions), a checkpointed one only region rules (on is the
//! default), so a plan's table leaves no pattern unmatched (Q4).

use crate::planner::Plan;
use crate::policies::glob::escape;
use crate::policies::rule::PolicyRule;
use crate::policies::table::PolicyTable;

impl Plan {
    /// The table that decides as this plan does.
    ///
    /// ```
    /// use remat_runtime::planner::{Choice, LayerPlan, Plan, Prediction, Target};
    /// use remat_runtime::Policy;
    /// let plan = Plan {
    ///     target: Target::Kept,
    ///     budget: None,
    ///     layers: vec![
    ///         LayerPlan {
    ///             name: "layers.0".into(),
    ///             regions: vec!["attention".into(), "mlp".into()],
    ///             choice: Choice { checkpointed: true, save: vec![true, false], offload: vec![false; 2] },
    ///             inputs: None,
    ///         },
    ///         LayerPlan {
    ///             name: "layers.1".into(),
    ///             regions: vec!["attention".into(), "mlp".into()],
    ///             choice: Choice::whole(2),
    ///             inputs: None,
    ///         },
    ///     ],
    ///     predicted: Prediction { kept_bytes: 0, peak_bytes: 0, replay_ns: 0, spread_ns: 0 },
    /// };
    /// let table = plan.to_table();
    /// assert_eq!(table.decide_region("layers.0", "attention"), Some(Policy::Save));
    /// assert_eq!(table.decide_region("layers.0", "mlp"), Some(Policy::Recompute));
    /// assert_eq!(table.decide_checkpoint("layers.1"), Some(false));
    /// ```
    pub fn to_table(&self) -> PolicyTable {
        let mut rules = Vec::new();
        for l in &self.layers {
            if !l.choice.checkpointed {
                rules.push(PolicyRule::Checkpoint {
                    pattern: escape(&l.name),
                    enabled: false,
                });
                continue;
            }
            for (i, r) in l.regions.iter().enumerate() {
                rules.push(PolicyRule::Region {
                    pattern: format!("{}::{}", escape(&l.name), escape(r)),
                    policy: l.choice.policy(i),
                });
            }
        }
        PolicyTable::from_rules(rules)
    }
}
