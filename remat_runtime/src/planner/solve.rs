//! Which choices a budget gets: the fastest plan that fits, then the tie
//! rule's pick among the plans as fast within what the profile can tell.
//!
//! Times are estimates with a spread, so the fastest plan is not taken as
//! it is: a plan whose interval `replay ± spread` overlaps the fastest's is
//! equivalent to it, and among those a second search picks by the fixed
//! rule of `Plan::for_budget` (fewer checkpointed blocks, then fewer bytes
//! rebuilt by replays, then less predicted time, then fewer bytes kept), so
//! that noise below the spread does not decide the plan; and if the pick at
//! a smaller budget is predicted faster, that one is taken, so that a
//! larger budget never gets a plan predicted slower (docs/planner.md,
//! "Equivalent plans", rule 4). Both searches are the exact front search of
//! front.rs under an objective of their own; a peak budget adds limits at
//! every point of the backward (backward.rs's levels) to both.
//!
//! Invariant: every plan returned is laid out by [`canonical`]: within a
//! kind, the blocks that keep least come first, unless that would not fit.

use crate::planner::backward::levels_of;
use crate::planner::cost::{ChoiceCost, Profile};
use crate::planner::front::{search, Allowed, Objective};
use crate::planner::predict::predict;
use std::collections::BTreeMap;

/// Bytes kept, then replay time: the front of the fastest plan.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Fast {
    bytes: i64,
    time: u64,
}

/// The fastest plan with `Σ bytes ≤ cap`.
struct Fastest {
    cap: i64,
    /// The time of the last entry kept in this layer: along a front sorted
    /// by bytes, only a strictly lower time is not dominated.
    last_time: Option<u64>,
}

impl Objective for Fastest {
    type Sum = Fast;

    fn zero() -> Fast {
        Fast { bytes: 0, time: 0 }
    }

    fn of(c: &ChoiceCost) -> Fast {
        Fast {
            bytes: c.bytes,
            time: c.replay_ns,
        }
    }

    fn plus(a: Fast, b: Fast) -> Fast {
        Fast {
            bytes: a.bytes + b.bytes,
            time: a.time + b.time,
        }
    }

    fn kept(s: &Fast) -> i64 {
        s.bytes
    }

    fn least(a: Fast, b: Fast) -> Fast {
        Fast {
            bytes: a.bytes.min(b.bytes),
            time: a.time.min(b.time),
        }
    }

    fn fits(&self, bound: &Fast) -> bool {
        bound.bytes <= self.cap
    }

    fn begin_layer(&mut self) {
        self.last_time = None;
    }

    fn keep(&mut self, s: &Fast) -> bool {
        let keep = self.last_time.is_none_or(|t| s.time < t);
        if keep {
            self.last_time = Some(s.time);
        }
        keep
    }

    fn pick(front: &[Fast]) -> usize {
        // Times fall strictly along the front: the last entry is the fastest.
        front.len() - 1
    }
}

/// What the tie rule compares, in order (each a sum over layers, so the
/// order is kept under adding the same layers: a dominated partial plan
/// stays behind).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct RuleKey {
    checkpointed: u32,
    rebuilt_bytes: i64,
    replay_ns: u64,
    kept_bytes: i64,
}

/// The rule's key, then the lower end of the time interval (may be below
/// zero).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Ruled {
    key: RuleKey,
    low: i64,
}

/// The first plan by [`RuleKey`] with `Σ bytes ≤ cap` whose time interval
/// reaches down to `limit` or below (`Σ (replay - spread) ≤ limit`).
struct ByRule {
    cap: i64,
    limit: i64,
    /// The entries kept in this layer as a staircase of bytes to the least
    /// low end at or below them.
    stairs: BTreeMap<i64, i64>,
}

impl Objective for ByRule {
    type Sum = Ruled;

    fn zero() -> Ruled {
        Ruled {
            key: RuleKey {
                checkpointed: 0,
                rebuilt_bytes: 0,
                replay_ns: 0,
                kept_bytes: 0,
            },
            low: 0,
        }
    }

    fn of(c: &ChoiceCost) -> Ruled {
        Ruled {
            key: RuleKey {
                checkpointed: u32::from(c.choice.checkpointed),
                rebuilt_bytes: c.working_set,
                replay_ns: c.replay_ns,
                kept_bytes: c.bytes,
            },
            low: c.replay_ns as i64 - c.spread_ns as i64,
        }
    }

    fn plus(a: Ruled, b: Ruled) -> Ruled {
        Ruled {
            key: RuleKey {
                checkpointed: a.key.checkpointed + b.key.checkpointed,
                rebuilt_bytes: a.key.rebuilt_bytes + b.key.rebuilt_bytes,
                replay_ns: a.key.replay_ns + b.key.replay_ns,
                kept_bytes: a.key.kept_bytes + b.key.kept_bytes,
            },
            low: a.low + b.low,
        }
    }

    fn kept(s: &Ruled) -> i64 {
        s.key.kept_bytes
    }

    fn least(a: Ruled, b: Ruled) -> Ruled {
        Ruled {
            key: RuleKey {
                checkpointed: a.key.checkpointed.min(b.key.checkpointed),
                rebuilt_bytes: a.key.rebuilt_bytes.min(b.key.rebuilt_bytes),
                replay_ns: a.key.replay_ns.min(b.key.replay_ns),
                kept_bytes: a.key.kept_bytes.min(b.key.kept_bytes),
            },
            low: a.low.min(b.low),
        }
    }

    fn fits(&self, bound: &Ruled) -> bool {
        bound.key.kept_bytes <= self.cap && bound.low <= self.limit
    }

    fn begin_layer(&mut self) {
        self.stairs.clear();
    }

    /// Kept unless one before it (no worse a key) also has no more bytes
    /// and no higher low end.
    fn keep(&mut self, s: &Ruled) -> bool {
        let bytes = s.key.kept_bytes;
        if self
            .stairs
            .range(..=bytes)
            .next_back()
            .is_some_and(|(_, &low)| low <= s.low)
        {
            return false;
        }
        let beaten: Vec<i64> = self
            .stairs
            .range(bytes..)
            .take_while(|&(_, &low)| low >= s.low)
            .map(|(&b, _)| b)
            .collect();
        for b in beaten {
            self.stairs.remove(&b);
        }
        self.stairs.insert(bytes, s.low);
        true
    }

    fn pick(_: &[Ruled]) -> usize {
        // Fronts are in rule order: the first entry wins.
        0
    }
}

/// What a budget bounds, and how much.
#[derive(Clone, Copy, Debug)]
pub(super) enum Bound {
    /// Bytes kept at the forward→backward point.
    Kept(i64),
    /// The predicted peak during backward.
    Peak(i64),
}

impl Bound {
    fn budget(self) -> i64 {
        match self {
            Bound::Kept(b) | Bound::Peak(b) => b,
        }
    }

    fn with(self, budget: i64) -> Bound {
        match self {
            Bound::Kept(_) => Bound::Kept(budget),
            Bound::Peak(_) => Bound::Peak(budget),
        }
    }

    /// What the bound measures of a plan.
    fn of(self, profile: &Profile, choices: &[usize]) -> i64 {
        let p = predict(profile, choices);
        match self {
            Bound::Kept(_) => p.kept_bytes,
            Bound::Peak(_) => p.peak_bytes,
        }
    }
}

/// The bound as the search's limits: a cap on the bytes kept over the
/// baseline, and for a peak, a limit at every point of the backward on
/// what the layers before it keep (backward.rs's `predict_levels`, term
/// by term).
fn limits<'a>(profile: &'a Profile, bound: Bound) -> (i64, Box<Allowed<'a>>) {
    match bound {
        Bound::Kept(b) => (b - profile.baseline_bytes, Box::new(|_, _, _| true)),
        Bound::Peak(b) => {
            let levels = levels_of(profile);
            let room = b - profile.gathered_bytes;
            let cap = levels.gaps[profile.layers.len()].map_or(i64::MAX / 2, |g| room - g);
            let within =
                move |level: Option<i64>, before: i64| level.is_none_or(|l| l + before <= room);
            let allowed = move |i: usize, before: i64, c: &ChoiceCost| {
                within(levels.gaps[i], before)
                    && within(levels.layers[i].map(|l| l + c.level_delta), before)
            };
            (cap, Box::new(allowed))
        }
    }
}

/// The fastest plan (replay time, then bytes) within `bound`; `None` when
/// none fits.
fn fastest(profile: &Profile, bound: Bound) -> Option<Vec<usize>> {
    let (cap, allowed) = limits(profile, bound);
    let objective = Fastest {
        cap,
        last_time: None,
    };
    search(profile, &*allowed, objective).map(|(_, choices)| canonical(profile, bound, choices))
}

/// Among the plans within `bound` whose time interval reaches down to
/// `limit`, the first by [`RuleKey`].
fn by_rule(profile: &Profile, bound: Bound, limit: i64) -> Option<Vec<usize>> {
    let (cap, allowed) = limits(profile, bound);
    let objective = ByRule {
        cap,
        limit,
        stairs: BTreeMap::new(),
    };
    search(profile, &*allowed, objective).map(|(_, choices)| canonical(profile, bound, choices))
}

/// The upper end of a plan's interval `replay ± spread`: plans whose
/// interval reaches below the fastest plan's upper end are equivalent to
/// it (rule 1).
fn upper_end(profile: &Profile, choices: &[usize]) -> i64 {
    let p = predict(profile, choices);
    p.replay_ns as i64 + p.spread_ns as i64
}

/// The least budget any plan fits.
fn least_budget(profile: &Profile, bound: Bound) -> i64 {
    match bound {
        Bound::Kept(_) => {
            let least: i64 = profile
                .layer_kind
                .iter()
                .map(|&k| {
                    let kind = &profile.kinds[k];
                    kind.choices.iter().map(|c| c.bytes).min().unwrap_or(0)
                })
                .sum();
            profile.baseline_bytes + least
        }
        Bound::Peak(_) => least_peak(profile),
    }
}

/// The plan a budget gets (`Plan::for_budget`, `Plan::for_peak_budget`;
/// docs/planner.md, "Equivalent plans"): the rule's pick among the plans
/// equivalent to the fastest that fits (rules 1 and 2), unless the rule's
/// pick at a smaller budget is predicted faster; then the fastest of those
/// picks (ties: the larger budget's), so that a larger budget never gets a
/// plan predicted slower (rule 4).
///
/// The fastest plan and the rule's pick at a budget stay what they are for
/// every smaller budget down to what the two need (fewer plans fit, and
/// both still do), so the picks below are found by stepping down past
/// that, one search pair per stretch.
pub(super) fn for_bound(profile: &Profile, bound: Bound) -> Option<Vec<usize>> {
    let least = least_budget(profile, bound);
    let mut budget = bound.budget();
    let mut best: Option<(u64, Vec<usize>)> = None;
    while budget >= least {
        let at = bound.with(budget);
        let Some(fast) = fastest(profile, at) else {
            break;
        };
        let pick = by_rule(profile, at, upper_end(profile, &fast))
            .expect("the fastest plan is equivalent to itself");
        let time = predict(profile, &pick).replay_ns;
        budget = bound.of(profile, &pick).max(bound.of(profile, &fast)) - 1;
        if best.as_ref().is_none_or(|(t, _)| time < *t) {
            best = Some((time, pick));
        }
    }
    best.map(|(_, choices)| choices)
}

/// The same multiset of choices per kind, laid out with the choices that
/// keep least first: the backward reaches the last layers first and frees
/// what they keep before the early layers replay, so this lowers what is
/// alive at every point (kept as given if it would not fit the bound).
fn canonical(profile: &Profile, bound: Bound, given: Vec<usize>) -> Vec<usize> {
    let mut choices = given.clone();
    for kind in &profile.kinds {
        let mut picked: Vec<usize> = kind.members.iter().map(|&m| choices[m]).collect();
        picked.sort_by_key(|&c| (kind.choices[c].bytes, c));
        for (&m, c) in kind.members.iter().zip(picked) {
            choices[m] = c;
        }
    }
    if bound.of(profile, &choices) <= bound.of(profile, &given).max(bound.budget()) {
        choices
    } else {
        given
    }
}

/// The least predicted peak of any plan: the peak is not a sum, so this
/// searches the budget, each try an exact feasibility search.
pub(super) fn least_peak(profile: &Profile) -> i64 {
    let fits = |b: i64| fastest(profile, Bound::Peak(b)).is_some();
    let all = profile.baseline_choices();
    // A budget that fits, then one that does not, then bisect.
    let mut high = predict(profile, &all).peak_bytes;
    let mut step = 1i64;
    let mut low = high - step;
    while fits(low) {
        high = low;
        step = step.saturating_mul(2);
        low = high.saturating_sub(step);
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    high
}
