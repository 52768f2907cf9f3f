//! The exact search under every plan: a dynamic program over the layers
//! whose state is the Pareto front of partial plans.
//!
//! Adding a layer combines every entry of the front with every allowed
//! choice of that layer; an entry that another beats on what the
//! objective compares is dropped. The sums an objective compares are
//! additive over layers (profile.rs), so a dropped partial plan can never
//! become the best complete one: the answer is exact. The two objectives
//! (the fastest plan, and the tie rule's pick among plans as fast) live in
//! solve.rs; this file only knows fronts.
//!
//! Invariant: entries are met in the order of their sums, then of their
//! parent and choice, so equal sums resolve the same way on every run.

use crate::planner::cost::{ChoiceCost, Profile};

/// What one dynamic program minimises and how it prunes.
pub(super) trait Objective {
    /// What a partial plan accumulates over its layers, ordered as the
    /// program meets the entries of one layer.
    type Sum: Copy + Ord;

    /// The sum of a plan with no layers.
    fn zero() -> Self::Sum;
    /// The sum one choice adds.
    fn of(cost: &ChoiceCost) -> Self::Sum;
    /// Two sums added.
    fn plus(a: Self::Sum, b: Self::Sum) -> Self::Sum;
    /// The bytes kept over the baseline in a sum (what a budget's limits
    /// on partial plans bound).
    fn kept(s: &Self::Sum) -> i64;
    /// Each part of two sums at its least: over the layers still to come,
    /// a bound no completion of a partial plan can beat.
    fn least(a: Self::Sum, b: Self::Sum) -> Self::Sum;
    /// Whether a partial plan whose sum, with the least the remaining
    /// layers can add, is `bound` may still complete within the limits.
    fn fits(&self, bound: &Self::Sum) -> bool;
    /// Starts the pruning of one layer's entries.
    fn begin_layer(&mut self);
    /// Whether an entry stays on the front, given the entries kept before
    /// it in this layer (met in order).
    fn keep(&mut self, sum: &Self::Sum) -> bool;
    /// Which entry of the last front is the answer.
    fn pick(front: &[Self::Sum]) -> usize;
}

#[derive(Clone, Copy)]
struct Entry<S> {
    sum: S,
    parent: usize,
    choice: usize,
}

/// Whether layer `i` may take a choice after layers that keep `kept`
/// bytes over the baseline (a peak budget's limit where the backward is
/// inside layer `i`, or just reached it).
pub(super) type Allowed<'a> = dyn Fn(usize, i64, &ChoiceCost) -> bool + 'a;

/// The best plan under `objective` whose every layer's choice is
/// `allowed` after the layers before it, as its sum and one choice index
/// per layer; `None` when no plan fits. `allowed` is monotone in the bytes
/// before: a partial plan that keeps less is allowed whatever one that
/// keeps more is, which keeps the front's pruning exact.
pub(super) fn search<O: Objective>(
    profile: &Profile,
    allowed: &Allowed<'_>,
    mut objective: O,
) -> Option<(O::Sum, Vec<usize>)> {
    let layers = profile.layer_kind.len();
    let choices = |i: usize| profile.kinds[profile.layer_kind[i]].choices.iter();
    // The least the layers from i on can add: prunes what cannot fit.
    let mut least_after = vec![O::zero(); layers + 1];
    for i in (0..layers).rev() {
        let least = choices(i).map(O::of).reduce(O::least)?;
        least_after[i] = O::plus(least_after[i + 1], least);
    }
    let mut fronts: Vec<Vec<Entry<O::Sum>>> = vec![vec![Entry {
        sum: O::zero(),
        parent: 0,
        choice: 0,
    }]];
    for i in 0..layers {
        let mut next = Vec::new();
        for (parent, e) in fronts[i].iter().enumerate() {
            for (choice, cost) in choices(i).enumerate() {
                let sum = O::plus(e.sum, O::of(cost));
                if allowed(i, O::kept(&e.sum), cost)
                    && objective.fits(&O::plus(sum, least_after[i + 1]))
                {
                    next.push(Entry {
                        sum,
                        parent,
                        choice,
                    });
                }
            }
        }
        next.sort_by_key(|e| (e.sum, e.parent, e.choice));
        objective.begin_layer();
        let front: Vec<Entry<O::Sum>> = next
            .into_iter()
            .filter(|e| objective.keep(&e.sum))
            .collect();
        if front.is_empty() {
            return None;
        }
        fronts.push(front);
    }
    let sums: Vec<O::Sum> = fronts[layers].iter().map(|e| e.sum).collect();
    let mut at = O::pick(&sums);
    let sum = sums[at];
    let mut picked = vec![0; layers];
    for i in (0..layers).rev() {
        let e = fronts[i + 1][at];
        picked[i] = e.choice;
        at = e.parent;
    }
    Some((sum, picked))
}
