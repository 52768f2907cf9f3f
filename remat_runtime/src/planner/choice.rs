//! One way to run one planned checkpoint (a [`Choice`]), and the decision
//! table a list of choices becomes when activated.
//!
//! Invariant: a choice names its regions by position in the layer's list of
//! `Auto` regions (forward order); the table maps them back to names.

use crate::checkpointing::auto::{Decision, DecisionTable};
use crate::checkpointing::policy::Policy;
use std::sync::Arc;

/// Whether a planned checkpoint checkpoints, and which of its `Auto`
/// regions save.
///
/// ```
/// use remat_runtime::planner::Choice;
/// let c = Choice { checkpointed: true, save: vec![true, false] };
/// assert_eq!(c.to_string(), "checkpoint [save, recompute]");
/// assert_eq!(Choice::whole(2).to_string(), "whole (not checkpointed)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Choice {
    /// Off: the block runs as plain code and autograd keeps what it saves.
    pub checkpointed: bool,
    /// Per `Auto` region (forward order): `Save` (true) or `Recompute`.
    pub save: Vec<bool>,
}

impl Choice {
    /// Checkpointed with every region recomputed: what `auto` means without
    /// a plan, and the baseline of a profile.
    ///
    /// ```
    /// let c = remat_runtime::planner::Choice::baseline(2);
    /// assert!(c.checkpointed && c.save == [false, false]);
    /// ```
    pub fn baseline(regions: usize) -> Choice {
        Choice {
            checkpointed: true,
            save: vec![false; regions],
        }
    }

    /// Not checkpointed.
    ///
    /// ```
    /// assert!(!remat_runtime::planner::Choice::whole(2).checkpointed);
    /// ```
    pub fn whole(regions: usize) -> Choice {
        Choice {
            checkpointed: false,
            save: vec![false; regions],
        }
    }

    /// Every choice of a layer with `regions` `Auto` regions: `whole` first
    /// when the checkpoint may be turned off, then the 2^R save/recompute
    /// assignments, the baseline (all recomputed) first of those.
    ///
    /// ```
    /// let all = remat_runtime::planner::Choice::all(2, true);
    /// assert_eq!(all.len(), 5);
    /// ```
    pub fn all(regions: usize, can_disable: bool) -> Vec<Choice> {
        let mut out = Vec::new();
        if can_disable {
            out.push(Choice::whole(regions));
        }
        for mask in 0..(1u32 << regions) {
            out.push(Choice {
                checkpointed: true,
                save: (0..regions).map(|r| mask & (1 << r) != 0).collect(),
            });
        }
        out
    }

    pub(crate) fn policy(&self, region: usize) -> Policy {
        if self.save[region] {
            Policy::Save
        } else {
            Policy::Recompute
        }
    }
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.checkpointed {
            return write!(f, "whole (not checkpointed)");
        }
        let policies: Vec<&str> = self
            .save
            .iter()
            .map(|&s| if s { "save" } else { "recompute" })
            .collect();
        write!(f, "checkpoint [{}]", policies.join(", "))
    }
}

/// The runtime's table for `(checkpoint name, its Auto region names,
/// choice)` per planned checkpoint.
pub(crate) fn decision_table<'a>(
    describe: String,
    layers: impl IntoIterator<Item = (&'a str, &'a [String], &'a Choice)>,
) -> DecisionTable {
    let checkpoints = layers
        .into_iter()
        .map(|(name, regions, choice)| {
            let decision = Decision {
                checkpointed: choice.checkpointed,
                regions: regions
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (r.clone(), choice.policy(i)))
                    .collect(),
            };
            (name.to_string(), Arc::new(decision))
        })
        .collect();
    DecisionTable {
        describe,
        checkpoints,
    }
}
