//! Which choices a budget gets: the fastest plan that fits, then the tie
//! rule's pick among the plans as fast within what the profile can tell.
//!
//! Times are estimates with a spread, so the fastest plan is not taken as
//! it is: a plan whose interval `replay ± spread` overlaps the fastest's is
//! equivalent to it, and among those a second search picks by the fixed
//! rule of `Plan::for_budget` (fewer checkpointed blocks, then fewer bytes
//! rebuilt by replays, then less predicted time, then fewer bytes kept), so
//! that noise below the spread does not decide the plan. Both searches are
//! the exact front search of front.rs under an objective of their own.
//!
//! Invariant: every plan returned is laid out by [`canonical`]: within a
//! kind, the blocks that keep least come first.

use crate::planner::cost::{predict, ChoiceCost, Profile};
use crate::planner::front::{search, Objective};
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

/// The cheapest (replay time, then bytes) choice per layer with
/// `Σ bytes ≤ cap`, among choices `allowed`; `None` when none fits.
fn fastest(
    profile: &Profile,
    allowed: &dyn Fn(&ChoiceCost) -> bool,
    cap: i64,
) -> Option<Vec<usize>> {
    let objective = Fastest {
        cap,
        last_time: None,
    };
    search(profile, allowed, objective).map(|(_, choices)| canonical(profile, choices))
}

/// Among the plans of `allowed` choices with `Σ bytes ≤ cap` whose time
/// interval reaches down to `limit`, the first by [`RuleKey`].
fn by_rule(
    profile: &Profile,
    allowed: &dyn Fn(&ChoiceCost) -> bool,
    cap: i64,
    limit: i64,
) -> Option<(RuleKey, Vec<usize>)> {
    let objective = ByRule {
        cap,
        limit,
        stairs: BTreeMap::new(),
    };
    search(profile, allowed, objective).map(|(sum, choices)| (sum.key, canonical(profile, choices)))
}

/// The upper end of the fastest plan's interval: plans reaching below it
/// are equivalent to it.
fn equivalence_limit(profile: &Profile, fastest: &[usize]) -> i64 {
    let p = predict(profile, fastest);
    p.replay_ns as i64 + p.spread_ns as i64
}

/// The choices of `Plan::for_budget` for a cap on `Σ bytes` over the
/// baseline: the fastest, then the rule's pick among its equivalents.
pub(super) fn for_kept(profile: &Profile, cap: i64) -> Option<Vec<usize>> {
    let allowed = |_: &ChoiceCost| true;
    let fast = fastest(profile, &allowed, cap)?;
    let limit = equivalence_limit(profile, &fast);
    by_rule(profile, &allowed, cap, limit).map(|(_, choices)| choices)
}

/// The choices of `Plan::for_peak_budget`: the peak (kept bytes plus the
/// largest working set) is not additive, so this is exact by trying every
/// cap on the largest working set, first for the fastest plan, then for the
/// rule's pick among its equivalents.
pub(super) fn for_peak(profile: &Profile, bytes: i64) -> Option<Vec<usize>> {
    let caps = working_set_caps(profile);
    let cap = |w: i64| bytes - w - profile.baseline_bytes - profile.gathered_bytes;
    let mut fast: Option<(u64, i64, Vec<usize>)> = None;
    for &w in &caps {
        let allowed = move |c: &ChoiceCost| c.working_set <= w;
        if let Some(choices) = fastest(profile, &allowed, cap(w)) {
            let p = predict(profile, &choices);
            if fast
                .as_ref()
                .is_none_or(|(t, b, _)| (p.replay_ns, p.peak_bytes) < (*t, *b))
            {
                fast = Some((p.replay_ns, p.peak_bytes, choices));
            }
        }
    }
    let (_, _, fast) = fast?;
    let limit = equivalence_limit(profile, &fast);
    let mut best: Option<(RuleKey, i64, Vec<usize>)> = None;
    for &w in &caps {
        let allowed = move |c: &ChoiceCost| c.working_set <= w;
        if let Some((key, choices)) = by_rule(profile, &allowed, cap(w), limit) {
            let peak = predict(profile, &choices).peak_bytes;
            if best.as_ref().is_none_or(|(k, p, _)| (key, peak) < (*k, *p)) {
                best = Some((key, peak, choices));
            }
        }
    }
    best.map(|(_, _, choices)| choices)
}

/// The same multiset of choices per kind, laid out with the choices that
/// keep least first: the backward reaches the last layers first and frees
/// what they keep before the early layers replay.
fn canonical(profile: &Profile, mut choices: Vec<usize>) -> Vec<usize> {
    for kind in &profile.kinds {
        let mut picked: Vec<usize> = kind.members.iter().map(|&m| choices[m]).collect();
        picked.sort_by_key(|&c| (kind.choices[c].bytes, c));
        for (&m, c) in kind.members.iter().zip(picked) {
            choices[m] = c;
        }
    }
    choices
}

/// Every distinct working set of a choice, ascending: the caps on the
/// largest replay's working set that the peak target tries.
fn working_set_caps(profile: &Profile) -> Vec<i64> {
    let mut caps: Vec<i64> = profile
        .kinds
        .iter()
        .flat_map(|k| k.choices.iter().map(|c| c.working_set))
        .collect();
    caps.sort_unstable();
    caps.dedup();
    caps
}

/// The least predicted peak of any plan (the peak is not additive, so this
/// takes the least over caps on the working set).
pub(super) fn least_peak(profile: &Profile) -> i64 {
    working_set_caps(profile)
        .into_iter()
        .filter_map(|w| {
            let least: Option<i64> = profile
                .layer_kind
                .iter()
                .map(|&k| {
                    profile.kinds[k]
                        .choices
                        .iter()
                        .filter(|c| c.working_set <= w)
                        .map(|c| c.bytes)
                        .min()
                })
                .sum();
            least.map(|l| profile.baseline_bytes + l + w)
        })
        .min()
        .unwrap_or(profile.baseline_bytes)
        + profile.gathered_bytes
}
