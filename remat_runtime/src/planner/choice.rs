//! One way to run one planned checkpoint (a [`Choice`]), and the decision
//! table a list of choices becomes when activated.
//!
//! Invariant: a choice names its regions by position in the layer's list of
//! `Auto` regions (forward order); the table maps them back to names.

use crate::checkpointing::auto::{Decision, DecisionTable};
use crate::policy::Policy;
use std::sync::Arc;

/// Whether a planned checkpoint checkpoints, and which of its `Auto`
/// regions save (and of those, which offload).
///
/// ```
/// use remat_runtime::planner::Choice;
/// let c = Choice { checkpointed: true, save: vec![true, false], offload: vec![false; 2] };
/// assert_eq!(c.to_string(), "checkpoint [save, recompute]");
/// assert_eq!(Choice::whole(2).to_string(), "whole (not checkpointed)");
/// let o = Choice { offload: vec![true, false], ..c };
/// assert_eq!(o.to_string(), "checkpoint [offload, recompute]");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Choice {
    /// Off: the block runs as plain code and autograd keeps what it saves.
    pub checkpointed: bool,
    /// Per `Auto` region (forward order): not recomputed (true: `Save`, or
    /// `Offload` where `offload` says so) or `Recompute`.
    pub save: Vec<bool>,
    /// Per `Auto` region: of the regions `save` marks, those whose keeps
    /// move to the CPU (`Policy::OFFLOAD`); ignored where `save` is false.
    pub offload: Vec<bool>,
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
            offload: vec![false; regions],
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
            offload: vec![false; regions],
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
                offload: vec![false; regions],
            });
        }
        out
    }

    /// [`Choice::all`], then every choice that offloads at least one of
    /// the regions it saves (3^R assignments in all): what a profile taken
    /// with offload considers.
    ///
    /// ```
    /// let all = remat_runtime::planner::Choice::all_with_offload(2, true);
    /// assert_eq!(all.len(), 1 + 9);
    /// assert_eq!(all[..5], remat_runtime::planner::Choice::all(2, true)[..]);
    /// ```
    pub fn all_with_offload(regions: usize, can_disable: bool) -> Vec<Choice> {
        let mut out = Choice::all(regions, can_disable);
        let plain = out.clone();
        for c in plain.iter().filter(|c| c.checkpointed) {
            let saved: Vec<usize> = (0..regions).filter(|&r| c.save[r]).collect();
            for mask in 1..(1u32 << saved.len()) {
                let mut offload = vec![false; regions];
                for (bit, &r) in saved.iter().enumerate() {
                    offload[r] = mask & (1 << bit) != 0;
                }
                out.push(Choice {
                    offload,
                    ..c.clone()
                });
            }
        }
        out
    }

    /// Whether region `region` offloads.
    pub(crate) fn offloads(&self, region: usize) -> bool {
        self.save[region] && self.offload[region]
    }

    /// The same choice with nothing offloaded.
    pub(crate) fn kept(&self) -> Choice {
        Choice {
            offload: vec![false; self.save.len()],
            ..self.clone()
        }
    }

    pub(crate) fn policy(&self, region: usize) -> Policy {
        if self.offloads(region) {
            Policy::OFFLOAD
        } else if self.save[region] {
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
        let policies: Vec<&str> = (0..self.save.len())
            .map(|r| self.policy(r).word())
            .collect();
        write!(f, "checkpoint [{}]", policies.join(", "))
    }
}

/// The runtime's table for `(checkpoint name, its Auto region names,
/// choice)` per planned checkpoint.
pub(crate) fn decision_table<'a>(
    describe: String,
    layers: impl IntoIterator<Item = (&'a str, &'a [String], &'a Choice, Option<&'a [Vec<i64>]>)>,
) -> DecisionTable {
    let checkpoints = layers
        .into_iter()
        .map(|(name, regions, choice, inputs)| {
            let decision = Decision {
                checkpointed: choice.checkpointed,
                inputs: inputs.map(<[Vec<i64>]>::to_vec),
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
