//! `Plan`: per planned checkpoint, whether it checkpoints and which `Auto`
//! regions save, chosen exactly for a byte budget; and its activation.
//!
//! The solver is a dynamic program over layers whose state is the Pareto
//! front of partial plans (bytes kept so far, replay time so far): adding a
//! layer combines every front entry with every choice of that layer, and
//! entries that another beats in both bytes and time are dropped. Both sums
//! are additive (profile.rs), so dropping a dominated partial plan never
//! loses the optimum: the answer is exact. Times are integers (ns), so
//! comparisons are exact too.
//!
//! The fastest plan is not taken as it is: times are estimates with a
//! spread, and a plan whose interval `replay ± spread` overlaps the
//! fastest's is as fast within what the profile can tell. A second dynamic
//! program picks among those by the fixed rule of [`Plan::for_budget`]
//! (fewer checkpointed blocks, then fewer bytes rebuilt by replays, then
//! less predicted time, then fewer bytes kept), so that noise below the
//! spread does not decide the plan. Its state is the front of partial
//! plans in (bytes, lower end of the time interval, rule key); all three
//! are additive, so this one is exact as well.
//!
//! Invariant: a plan's `predicted` is always what [`predict`] says for its
//! choices under the profile it was made or checked against.

use crate::checkpointing::auto::{self, ActiveGuard};
use crate::diagnostics::format::human_bytes;
use crate::error::{Error, Result};
use crate::planner::choice::{decision_table, Choice};
use crate::planner::cost::{ChoiceCost, Profile};
use crate::policy::Policy;
use std::fmt;
use std::sync::Arc;

/// What a budget bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Bytes kept at the forward→backward point.
    Kept,
    /// Predicted peak during backward: kept bytes plus the largest replay's
    /// working set.
    Peak,
}

/// The predicted cost of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prediction {
    /// Bytes kept at the forward→backward point (the measure of
    /// [`measure_kept_bytes`](crate::planner::measure_kept_bytes)).
    pub kept_bytes: i64,
    /// `kept_bytes` plus the largest working set of a replay.
    pub peak_bytes: i64,
    /// Total replay time in one backward, ns.
    pub replay_ns: u64,
    /// The spread of `replay_ns`: the sum of its choices' spreads (the
    /// profile's estimates of one kind err alike wherever they enter), ns.
    pub spread_ns: u64,
}

/// What a plan decides for one checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerPlan {
    /// The checkpoint's name.
    pub name: String,
    /// Its `Auto` regions, in the order of `choice.save`.
    pub regions: Vec<String>,
    /// What it does.
    pub choice: Choice,
    /// The shapes of its inputs when the profile measured it; a call with
    /// other shapes under this plan is an error naming it (the plan's
    /// figures would not hold). `None`: not checked.
    pub inputs: Option<Vec<Vec<i64>>>,
}

impl LayerPlan {
    /// The policy the plan gives region `name`.
    ///
    /// ```
    /// use remat_runtime::planner::{Choice, LayerPlan};
    /// use remat_runtime::Policy;
    /// let l = LayerPlan {
    ///     name: "layers.0".into(),
    ///     regions: vec!["attention".into()],
    ///     choice: Choice { checkpointed: true, save: vec![true], offload: vec![false] },
    ///     inputs: None,
    /// };
    /// assert_eq!(l.policy("attention"), Some(Policy::Save));
    /// ```
    pub fn policy(&self, name: &str) -> Option<Policy> {
        let i = self.regions.iter().position(|r| r == name)?;
        Some(self.choice.policy(i))
    }
}

/// Per planned checkpoint, whether it checkpoints and which `Auto` regions
/// save; activate it around the forward with [`Plan::activate`].
///
/// ```
/// use remat_runtime::{checkpoint, planner, recompute_needs_tensor, region, Policy};
/// use remat_runtime::planner::Plan;
/// let w = tch::Tensor::ones([8, 8], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let forward = || {
///     let w = w.shallow_clone();
///     checkpoint("layers.0").auto().call(&w, |w| {
///         let h = region("exp", Policy::Auto).call(&w, |w| (w * 2).exp());
///         recompute_needs_tensor(&h);
///         h.sin().sum(tch::Kind::Float)
///     })
/// };
/// let profile = planner::profile(forward).unwrap();
/// let plan = Plan::for_budget(&profile, 1 << 20).unwrap(); // plenty: nothing replays
/// assert_eq!(plan.predicted.replay_ns, 0);
/// let (loss, kept) = plan.scope(|| planner::measure_kept_bytes(forward));
/// assert_eq!(kept, plan.predicted.kept_bytes);
/// loss.backward();
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// What `budget` bounds.
    pub target: Target,
    /// The budget it was made for (`None` for a plan given by its choices).
    pub budget: Option<i64>,
    /// One entry per planned checkpoint, in forward order.
    pub layers: Vec<LayerPlan>,
    /// What it costs, by the profile.
    pub predicted: Prediction,
}

/// Keeps a plan active on this thread; see [`Plan::activate`].
pub struct PlanGuard {
    _active: ActiveGuard,
}

/// The prediction for one choice index per layer.
///
/// ```no_run
/// # fn f(profile: &remat_runtime::planner::Profile) {
/// let baseline: Vec<usize> = vec![1; profile.layers.len()];
/// let p = remat_runtime::planner::predict(profile, &baseline);
/// # }
/// ```
pub fn predict(profile: &Profile, choices: &[usize]) -> Prediction {
    let costs = choices
        .iter()
        .enumerate()
        .map(|(i, &c)| &profile.kinds[profile.layer_kind[i]].choices[c]);
    let (mut kept, mut replay, mut spread, mut ws) = (profile.baseline_bytes, 0, 0, 0);
    for c in costs {
        kept += c.bytes;
        replay += c.replay_ns;
        spread += c.spread_ns;
        ws = ws.max(c.working_set);
    }
    Prediction {
        kept_bytes: kept,
        peak_bytes: kept + ws,
        replay_ns: replay,
        spread_ns: spread,
    }
}

/// Every assignment the planner considers: one choice index per layer, all
/// `K^L` of them (for brute-force checks on small models).
///
/// ```no_run
/// # fn f(profile: &remat_runtime::planner::Profile) {
/// for choices in remat_runtime::planner::assignments(profile) {
///     let _ = remat_runtime::planner::predict(profile, &choices);
/// }
/// # }
/// ```
pub fn assignments(profile: &Profile) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for &k in &profile.layer_kind {
        let n = profile.kinds[k].choices.len();
        out = out
            .into_iter()
            .flat_map(|prefix| {
                (0..n).map(move |c| {
                    let mut next = prefix.clone();
                    next.push(c);
                    next
                })
            })
            .collect();
    }
    out
}

#[derive(Clone, Copy)]
struct Entry {
    bytes: i64,
    time: u64,
    parent: usize,
    choice: usize,
}

/// The cheapest (replay time, then bytes) choice per layer with
/// `Σ delta ≤ cap`, among choices `allowed`; `None` when none fits.
fn fastest(
    profile: &Profile,
    allowed: &dyn Fn(&ChoiceCost) -> bool,
    cap: i64,
) -> Option<Vec<usize>> {
    let kinds = &profile.kinds;
    let layers = profile.layer_kind.len();
    // The least bytes the layers from i on can add: prunes what cannot fit.
    let mut least_after = vec![0i64; layers + 1];
    for i in (0..layers).rev() {
        let least = kinds[profile.layer_kind[i]]
            .choices
            .iter()
            .filter(|c| allowed(c))
            .map(|c| c.bytes)
            .min()?;
        least_after[i] = least_after[i + 1] + least;
    }
    let mut fronts: Vec<Vec<Entry>> = Vec::with_capacity(layers + 1);
    fronts.push(vec![Entry {
        bytes: 0,
        time: 0,
        parent: 0,
        choice: 0,
    }]);
    for i in 0..layers {
        let mut next = Vec::new();
        for (p, e) in fronts[i].iter().enumerate() {
            for (c, cost) in kinds[profile.layer_kind[i]].choices.iter().enumerate() {
                let bytes = e.bytes + cost.bytes;
                if allowed(cost) && bytes + least_after[i + 1] <= cap {
                    next.push(Entry {
                        bytes,
                        time: e.time + cost.replay_ns,
                        parent: p,
                        choice: c,
                    });
                }
            }
        }
        next.sort_by_key(|e| (e.bytes, e.time, e.parent, e.choice));
        let mut front: Vec<Entry> = Vec::new();
        for e in next {
            if front.last().is_none_or(|last| e.time < last.time) {
                front.push(e);
            }
        }
        if front.is_empty() {
            return None;
        }
        fronts.push(front);
    }
    // Times fall strictly along the front: the last entry is the fastest.
    let mut at = fronts[layers].len() - 1;
    let mut choices = vec![0; layers];
    for i in (0..layers).rev() {
        let e = fronts[i + 1][at];
        choices[i] = e.choice;
        at = e.parent;
    }
    Some(canonical(profile, choices))
}

/// What the tie rule compares, in order (each a sum over layers, so the
/// vector order is kept under adding the same layers: a dominated partial
/// plan stays behind).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct RuleKey {
    checkpointed: u32,
    rebuilt_bytes: i64,
    replay_ns: u64,
    kept_bytes: i64,
}

impl RuleKey {
    fn of(c: &ChoiceCost) -> RuleKey {
        RuleKey {
            checkpointed: u32::from(c.choice.checkpointed),
            rebuilt_bytes: c.working_set,
            replay_ns: c.replay_ns,
            kept_bytes: c.bytes,
        }
    }

    fn add(self, o: RuleKey) -> RuleKey {
        RuleKey {
            checkpointed: self.checkpointed + o.checkpointed,
            rebuilt_bytes: self.rebuilt_bytes + o.rebuilt_bytes,
            replay_ns: self.replay_ns + o.replay_ns,
            kept_bytes: self.kept_bytes + o.kept_bytes,
        }
    }
}

/// The lower end of a choice's time interval (may be below zero).
fn low_ns(c: &ChoiceCost) -> i64 {
    c.replay_ns as i64 - c.spread_ns as i64
}

#[derive(Clone, Copy)]
struct RuleEntry {
    key: RuleKey,
    low: i64,
    parent: usize,
    choice: usize,
}

/// Among the plans of `allowed` choices with `Σ delta ≤ cap` whose time
/// interval reaches down to `limit` or below (`Σ (replay - spread) ≤
/// limit`), the first by [`RuleKey`]; `None` when none.
fn by_rule(
    profile: &Profile,
    allowed: &dyn Fn(&ChoiceCost) -> bool,
    cap: i64,
    limit: i64,
) -> Option<(RuleKey, Vec<usize>)> {
    let kinds = &profile.kinds;
    let layers = profile.layer_kind.len();
    let mut least_bytes = vec![0i64; layers + 1];
    let mut least_low = vec![0i64; layers + 1];
    for i in (0..layers).rev() {
        let ok = || {
            kinds[profile.layer_kind[i]]
                .choices
                .iter()
                .filter(|c| allowed(c))
        };
        least_bytes[i] = least_bytes[i + 1] + ok().map(|c| c.bytes).min()?;
        least_low[i] = least_low[i + 1] + ok().map(low_ns).min()?;
    }
    let zero = RuleKey {
        checkpointed: 0,
        rebuilt_bytes: 0,
        replay_ns: 0,
        kept_bytes: 0,
    };
    let mut fronts: Vec<Vec<RuleEntry>> = vec![vec![RuleEntry {
        key: zero,
        low: 0,
        parent: 0,
        choice: 0,
    }]];
    for i in 0..layers {
        let mut next = Vec::new();
        for (p, e) in fronts[i].iter().enumerate() {
            for (c, cost) in kinds[profile.layer_kind[i]].choices.iter().enumerate() {
                let key = e.key.add(RuleKey::of(cost));
                let low = e.low + low_ns(cost);
                if allowed(cost)
                    && key.kept_bytes + least_bytes[i + 1] <= cap
                    && low + least_low[i + 1] <= limit
                {
                    next.push(RuleEntry {
                        key,
                        low,
                        parent: p,
                        choice: c,
                    });
                }
            }
        }
        next.sort_by_key(|e| (e.key, e.low, e.parent, e.choice));
        // Keep an entry unless one before it (no worse a key) also has no
        // more bytes and no higher low end: a staircase of (bytes, low).
        let mut stairs: std::collections::BTreeMap<i64, i64> = Default::default();
        let mut front = Vec::new();
        for e in next {
            let bytes = e.key.kept_bytes;
            if stairs
                .range(..=bytes)
                .next_back()
                .is_some_and(|(_, &low)| low <= e.low)
            {
                continue;
            }
            let beaten: Vec<i64> = stairs
                .range(bytes..)
                .take_while(|&(_, &low)| low >= e.low)
                .map(|(&b, _)| b)
                .collect();
            for b in beaten {
                stairs.remove(&b);
            }
            stairs.insert(bytes, e.low);
            front.push(e);
        }
        if front.is_empty() {
            return None;
        }
        fronts.push(front);
    }
    // Fronts are in rule order: the first entry of the last one wins.
    let key = fronts[layers][0].key;
    let mut at = 0;
    let mut choices = vec![0; layers];
    for i in (0..layers).rev() {
        let e = fronts[i + 1][at];
        choices[i] = e.choice;
        at = e.parent;
    }
    Some((key, canonical(profile, choices)))
}

/// The upper end of the fastest plan's interval: plans reaching below it
/// are equivalent to it.
fn equivalence_limit(profile: &Profile, fastest: &[usize]) -> i64 {
    let p = predict(profile, fastest);
    p.replay_ns as i64 + p.spread_ns as i64
}

/// The plan of [`Plan::for_budget`] for choices `allowed` and a cap on
/// `Σ delta`: the fastest, then the rule's pick among its equivalents.
fn solve(profile: &Profile, allowed: &dyn Fn(&ChoiceCost) -> bool, cap: i64) -> Option<Vec<usize>> {
    let fast = fastest(profile, allowed, cap)?;
    let limit = equivalence_limit(profile, &fast);
    by_rule(profile, allowed, cap, limit).map(|(_, choices)| choices)
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

impl Plan {
    /// A plan whose predicted bytes kept at the forward→backward point are
    /// at most `bytes`, as fast as the profile can tell: among the plans
    /// that fit, those whose interval `replay ± spread` overlaps the
    /// fastest one's are equivalent, and of those it takes the one with
    /// (in this order) the fewest checkpointed blocks, the fewest bytes
    /// rebuilt by replays (the sum of the choices' working sets), the
    /// least predicted replay time, the fewest bytes kept. Within a kind
    /// of checkpoint, the blocks that keep least come first (docs/planner.md,
    /// "Equivalent plans"). Fails, stating the minimum, when no plan fits.
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// let plan = remat_runtime::planner::Plan::for_budget(profile, 60 << 20).unwrap();
    /// println!("{plan}");
    /// # }
    /// ```
    pub fn for_budget(profile: &Profile, bytes: i64) -> Result<Plan> {
        let cap = bytes - profile.baseline_bytes;
        match solve(profile, &|_| true, cap) {
            Some(choices) => Ok(Plan::build(profile, Target::Kept, Some(bytes), &choices)),
            None => {
                let least = Plan::minimum(profile);
                Err(Error::Plan(format!(
                    "the budget {} ({bytes} bytes) is below the minimum possible {} ({} bytes) \
                     kept at the forward→backward point, {}; raise the budget",
                    human_bytes(bytes),
                    human_bytes(least.predicted.kept_bytes),
                    least.predicted.kept_bytes,
                    least.describe_minimum(),
                )))
            }
        }
    }

    /// Like [`Plan::for_budget`], with the budget bounding the predicted
    /// peak during backward (kept bytes plus the largest replay's working
    /// set) instead of the kept bytes.
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// let plan = remat_runtime::planner::Plan::for_peak_budget(profile, 80 << 20).unwrap();
    /// assert!(plan.predicted.peak_bytes <= 80 << 20);
    /// # }
    /// ```
    pub fn for_peak_budget(profile: &Profile, bytes: i64) -> Result<Plan> {
        // Exact: try every cap on the largest working set, first for the
        // fastest plan, then for the rule's pick among its equivalents.
        let caps = working_set_caps(profile);
        let cap = |w: i64| bytes - w - profile.baseline_bytes;
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
        let mut best: Option<(RuleKey, i64, Plan)> = None;
        if let Some((_, _, fast)) = fast {
            let limit = equivalence_limit(profile, &fast);
            for &w in &caps {
                let allowed = move |c: &ChoiceCost| c.working_set <= w;
                if let Some((key, choices)) = by_rule(profile, &allowed, cap(w), limit) {
                    let plan = Plan::build(profile, Target::Peak, Some(bytes), &choices);
                    let peak = plan.predicted.peak_bytes;
                    if best.as_ref().is_none_or(|(k, p, _)| (key, peak) < (*k, *p)) {
                        best = Some((key, peak, plan));
                    }
                }
            }
        }
        let best = best.map(|(_, _, plan)| plan);
        best.ok_or_else(|| {
            let least = assignments_min_peak(profile);
            Error::Plan(format!(
                "the budget {} ({bytes} bytes) is below the minimum possible predicted peak {} \
                 ({least} bytes) during backward; raise the budget",
                human_bytes(bytes),
                human_bytes(least),
            ))
        })
    }

    /// The plan that keeps least (ties: the least replay time).
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// let least = remat_runtime::planner::Plan::minimum(profile);
    /// assert!(remat_runtime::planner::Plan::for_budget(profile, least.predicted.kept_bytes - 1).is_err());
    /// # }
    /// ```
    pub fn minimum(profile: &Profile) -> Plan {
        let choices: Vec<usize> = profile
            .layer_kind
            .iter()
            .map(|&k| {
                let kind = &profile.kinds[k];
                (0..kind.choices.len())
                    .min_by_key(|&c| (kind.choices[c].bytes, kind.choices[c].replay_ns))
                    .unwrap_or(0)
            })
            .collect();
        Plan::build(profile, Target::Kept, None, &choices)
    }

    /// The plan of one choice index per layer (indices into its kind's
    /// `choices`), with its prediction.
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// use remat_runtime::planner::Plan;
    /// let baseline = Plan::from_choices(profile, &vec![1; profile.layers.len()]).unwrap();
    /// # }
    /// ```
    pub fn from_choices(profile: &Profile, choices: &[usize]) -> Result<Plan> {
        if choices.len() != profile.layers.len() {
            return Err(Error::Plan(format!(
                "{} choice(s) given for {} planned checkpoint(s)",
                choices.len(),
                profile.layers.len()
            )));
        }
        for (i, &c) in choices.iter().enumerate() {
            let n = profile.kinds[profile.layer_kind[i]].choices.len();
            if c >= n {
                return Err(Error::Plan(format!(
                    "choice {c} for checkpoint `{}`, which has {n}",
                    profile.layers[i]
                )));
            }
        }
        Ok(Plan::build(profile, Target::Kept, None, choices))
    }

    fn build(profile: &Profile, target: Target, budget: Option<i64>, choices: &[usize]) -> Plan {
        let layers = choices
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let kind = &profile.kinds[profile.layer_kind[i]];
                LayerPlan {
                    name: profile.layers[i].clone(),
                    regions: kind.regions.clone(),
                    choice: kind.choices[c].choice.clone(),
                    inputs: Some(kind.input_sizes.clone()),
                }
            })
            .collect();
        Plan {
            target,
            budget,
            layers,
            predicted: predict(profile, choices),
        }
    }

    /// The choice index per layer under `profile` (the plan must match it;
    /// see [`Plan::check`]).
    pub(crate) fn choice_indices(&self, profile: &Profile) -> Vec<usize> {
        self.layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let kind = &profile.kinds[profile.layer_kind[i]];
                let policies: Vec<Option<Policy>> =
                    kind.regions.iter().map(|r| l.policy(r)).collect();
                let want = if l.choice.checkpointed {
                    Choice {
                        checkpointed: true,
                        save: policies
                            .iter()
                            .map(|p| p.is_some_and(Policy::keeps))
                            .collect(),
                        offload: policies
                            .iter()
                            .map(|p| matches!(p, Some(Policy::Offload(_))))
                            .collect(),
                    }
                } else {
                    Choice::whole(kind.regions.len())
                };
                kind.choices
                    .iter()
                    .position(|c| c.choice == want)
                    .unwrap_or(0)
            })
            .collect()
    }

    fn describe_minimum(&self) -> String {
        let baseline = self
            .layers
            .iter()
            .all(|l| l.choice.checkpointed && l.choice.save.iter().all(|s| !s));
        if baseline {
            "with every planned block checkpointed and every `auto` region recomputed".into()
        } else {
            format!("with {}", self.summary())
        }
    }

    /// One line per distinct decision: `layers.0-1: checkpoint [save, recompute]`.
    fn summary(&self) -> String {
        self.layers
            .iter()
            .map(|l| format!("{}: {}", l.name, l.choice))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Makes this plan decide `Policy::Auto` regions and `auto()`
    /// checkpoints started on this thread until the guard drops (the
    /// innermost active plan wins). Each checkpoint takes its decision when
    /// its forward starts and keeps it for its replay, whichever thread
    /// runs that.
    ///
    /// ```no_run
    /// # fn f(plan: &remat_runtime::planner::Plan, forward: impl Fn() -> tch::Tensor) {
    /// let loss = {
    ///     let _plan = plan.activate();
    ///     forward()
    /// };
    /// loss.backward(); // replays as the forward decided
    /// # }
    /// ```
    pub fn activate(&self) -> PlanGuard {
        let describe = match self.budget {
            Some(b) => format!("the active plan (budget {})", human_bytes(b)),
            None => "the active plan".to_string(),
        };
        let table = decision_table(
            describe,
            self.layers.iter().map(|l| {
                (
                    l.name.as_str(),
                    l.regions.as_slice(),
                    &l.choice,
                    l.inputs.as_deref(),
                )
            }),
        );
        PlanGuard {
            _active: auto::push(Some(Arc::new(table))),
        }
    }

    /// Runs `f` with this plan active (see [`Plan::activate`]).
    ///
    /// ```no_run
    /// # fn f(plan: &remat_runtime::planner::Plan, forward: impl Fn() -> tch::Tensor) {
    /// plan.scope(|| forward()).backward();
    /// # }
    /// ```
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _active = self.activate();
        f()
    }

    /// Checks that this plan matches the model `profile` describes: the
    /// same planned checkpoints and, in each, the same `auto` regions; a
    /// checkpoint is off only if it is `auto()`. The error names what
    /// differs.
    ///
    /// ```no_run
    /// # fn f(plan: &remat_runtime::planner::Plan, profile: &remat_runtime::planner::Profile) {
    /// plan.check(profile).unwrap();
    /// # }
    /// ```
    pub fn check(&self, profile: &Profile) -> Result<()> {
        let names: Vec<&str> = self.layers.iter().map(|l| l.name.as_str()).collect();
        let model: Vec<&str> = profile.layers.iter().map(String::as_str).collect();
        if names != model {
            let extra: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| !model.contains(n))
                .collect();
            let missing: Vec<&str> = model
                .iter()
                .copied()
                .filter(|n| !names.contains(n))
                .collect();
            let mut message = format!(
                "the plan does not match the model: the plan has {} planned checkpoint(s), the \
                 model {}",
                names.len(),
                model.len()
            );
            if !extra.is_empty() {
                message += &format!("; not in the model: {}", extra.join(", "));
            }
            if !missing.is_empty() {
                message += &format!("; missing from the plan: {}", missing.join(", "));
            }
            if extra.is_empty() && missing.is_empty() {
                message += "; the same names in another order";
            }
            return Err(Error::Plan(message + "; make a new plan for this model"));
        }
        for (i, l) in self.layers.iter().enumerate() {
            let kind = &profile.kinds[profile.layer_kind[i]];
            let unknown: Vec<&str> = l
                .regions
                .iter()
                .filter(|r| !kind.regions.contains(r))
                .map(String::as_str)
                .collect();
            let missing: Vec<&str> = kind
                .regions
                .iter()
                .filter(|r| !l.regions.contains(r))
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() || !missing.is_empty() {
                return Err(Error::Plan(format!(
                    "the plan does not match the model: checkpoint `{}` has `auto` regions {} \
                     in the model; the plan names {}{}{}",
                    l.name,
                    list(&kind.regions),
                    list(&l.regions),
                    if unknown.is_empty() {
                        String::new()
                    } else {
                        format!(" (unknown: {})", unknown.join(", "))
                    },
                    if missing.is_empty() {
                        String::new()
                    } else {
                        format!(" (missing: {})", missing.join(", "))
                    },
                )));
            }
            if !l.choice.checkpointed && !kind.can_disable {
                return Err(Error::Plan(format!(
                    "the plan does not match the model: it turns checkpoint `{}` off, but the \
                     model's checkpoint is not `auto()` and always checkpoints",
                    l.name
                )));
            }
        }
        Ok(())
    }

    /// This plan checked against `profile`, with its regions in the
    /// profile's order and its prediction recomputed from the profile.
    ///
    /// ```no_run
    /// # fn f(plan: remat_runtime::planner::Plan, profile: &remat_runtime::planner::Profile) {
    /// let plan = plan.rebased(profile).unwrap();
    /// # }
    /// ```
    pub fn rebased(self, profile: &Profile) -> Result<Plan> {
        self.check(profile)?;
        let choices = self.choice_indices(profile);
        let mut plan = Plan::build(profile, self.target, self.budget, &choices);
        plan.budget = self.budget;
        Ok(plan)
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
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
fn assignments_min_peak(profile: &Profile) -> i64 {
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
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match self.target {
            Target::Kept => "kept",
            Target::Peak => "peak",
        };
        match self.budget {
            Some(b) => write!(f, "plan for {} {target}", human_bytes(b))?,
            None => write!(f, "plan")?,
        }
        writeln!(
            f,
            " (predicted: {} kept, peak {}, replay {:.3} ± {:.3} ms)",
            human_bytes(self.predicted.kept_bytes),
            human_bytes(self.predicted.peak_bytes),
            self.predicted.replay_ns as f64 / 1e6,
            self.predicted.spread_ns as f64 / 1e6
        )?;
        for l in &self.layers {
            if !l.choice.checkpointed {
                writeln!(f, "  {:<12} whole (not checkpointed)", l.name)?;
                continue;
            }
            let regions: Vec<String> = l
                .regions
                .iter()
                .enumerate()
                .map(|(i, r)| format!("{r}: {}", l.choice.policy(i).word()))
                .collect();
            writeln!(f, "  {:<12} checkpoint  {}", l.name, regions.join(", "))?;
        }
        Ok(())
    }
}
