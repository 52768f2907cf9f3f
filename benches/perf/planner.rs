//! Section 4: the memory-budget planner against measured step times.
//!
//! Small config: every assignment the planner considers is measured, and
//! at each budget the plan's choice is compared with the fastest measured
//! assignment within that budget. Medium config: the hand policies, the
//! plans at their bytes, and plans from the least bytes to `none`'s (the
//! Pareto frontier). All variants of a config run interleaved, round by
//! round, like the rest of the bench.

use crate::accuracy::{agreement, costs_line, hand_choices, median_prediction, Agreement};
use crate::rust_side::{policy_name, step};
use crate::stats::ratios;
use crate::variant::{plan_label, Runner, Variant};
use remat::planner::{self, measure_kept_bytes, Choice, Plan};
use remat_reference::model::{Config, ModelPolicy, Setup, POLICIES};
use remat_reference::testing::assignments;

/// Steps per variant and round on the small config (the round's value is
/// their least: a step of a few ms is about one time slice).
pub const SMALL_REPS: usize = 5;

/// Steps per variant and round on the medium config (about a second each).
pub const MEDIUM_REPS: usize = 2;

/// The small config's check: per budget, the plan against the best
/// measured assignment within it (indexes into `assignments`).
pub struct BudgetRow {
    pub budget: i64,
    pub plan: usize,
    pub best: usize,
}

pub struct SmallCheck {
    pub config: &'static str,
    /// The profile, as printed (what the plans were made from).
    pub profile: String,
    pub rounds: usize,
    pub assignments: Vec<Variant>,
    pub rows: Vec<BudgetRow>,
}

/// The medium config's frontier: hand policies, plans at their bytes
/// (indexes into `plans`, one per hand policy), and the budget sweep.
pub struct Frontier {
    pub config: &'static str,
    /// Timing runs of each of its profiles.
    pub profile_runs: usize,
    /// The profile, as printed.
    pub profile: String,
    pub rounds: usize,
    pub hand: Vec<Variant>,
    /// The hand policies again, measured alone in three stretches, one
    /// after each profile, for the time model's check (rounds of four
    /// variants are short, so the machine drifts less within one); their
    /// predictions are the median of the three profiles'.
    pub accuracy: Vec<Variant>,
    pub accuracy_rounds: usize,
    pub plans: Vec<Variant>,
    pub at_hand: Vec<usize>,
    pub sweep: Vec<usize>,
    /// Each hand policy written as a plan's label (the same assignment of
    /// the reference model's `Auto` regions and blocks).
    pub hand_as_plan: Vec<String>,
    /// Each of the three profiles' costs, as one line.
    pub profile_costs: Vec<String>,
    /// The plans of the three profiles at the hand policies' bytes and the
    /// sweep's budgets.
    pub agreement: Vec<Agreement>,
}

/// A hand policy of the reference model as an assignment's label: every
/// block the same (regions in forward order: attention, MLP).
fn hand_label(policy: ModelPolicy, layers: usize) -> String {
    let block = match policy {
        ModelPolicy::None => "whole",
        ModelPolicy::Full => "RR",
        ModelPolicy::Selective => "SR",
        ModelPolicy::SaveMlp => "RS",
        ModelPolicy::Auto => "?",
    };
    vec![block; layers].join(" / ")
}

fn choices_of(plan: &Plan) -> Vec<Choice> {
    plan.layers.iter().map(|l| l.choice.clone()).collect()
}

/// A profile with `runs` timing runs.
fn profile(setup: &Setup, runs: usize) -> Result<planner::Profile, String> {
    // The plan is only as good as the profile's times: on a shared machine
    // they need many rounds.
    planner::profile_with(|| setup.loss(ModelPolicy::Auto), runs).map_err(|e| e.to_string())
}

fn plan_variant(setup: &Setup, plan: Plan) -> Variant {
    let (loss, bytes) = plan.scope(|| measure_kept_bytes(|| setup.loss(ModelPolicy::Auto)));
    drop(loss);
    Variant {
        label: plan_label(&plan),
        bytes,
        predicted_bytes: Some(plan.predicted.kept_bytes),
        predicted_replay: Some(plan.predicted.replay_ns as f64 / 1e9),
        predicted_spread: Some(plan.predicted.spread_ns as f64 / 1e9),
        runner: Runner::Plan(Box::new(plan)),
        times: Vec::new(),
    }
}

fn hand_variant(setup: &Setup, policy: ModelPolicy) -> Variant {
    let (loss, bytes) = measure_kept_bytes(|| setup.loss(policy));
    drop(loss);
    Variant {
        label: format!("`{}`", policy_name(policy)),
        runner: Runner::Hand(policy),
        bytes,
        predicted_bytes: None,
        predicted_replay: None,
        predicted_spread: None,
        times: Vec::new(),
    }
}

/// Runs every variant once per round (a first, untimed round warms up),
/// rotating the order; each round's value is the least of `reps` steps.
fn measure(setup: &Setup, variants: &mut [&mut Variant], rounds: usize, reps: usize, what: &str) {
    let n = variants.len();
    for round in 0..=rounds {
        for k in 0..n {
            let v = &mut variants[(k + round) % n];
            let best = (0..reps)
                .map(|_| match &v.runner {
                    Runner::Hand(p) => step(setup, *p).0,
                    Runner::Plan(plan) => plan.scope(|| step(setup, ModelPolicy::Auto).0),
                })
                .fold(f64::INFINITY, f64::min);
            if round > 0 {
                v.times.push(best);
            }
        }
        eprintln!("bench: planner, {what}, round {round}/{rounds}");
    }
}

/// Every assignment of `cfg` measured; per distinct budget (the bytes of
/// some assignment), the plan's choice and the fastest within it.
pub fn small_check(
    config: &'static str,
    cfg: Config,
    rounds: usize,
    profile_runs: usize,
) -> Result<SmallCheck, String> {
    let setup = Setup::on(cfg, crate::device());
    let profile = profile(&setup, profile_runs)?;
    let mut all: Vec<Variant> = assignments(&profile)
        .iter()
        .map(|c| {
            let plan = Plan::from_choices(&profile, c).map_err(|e| e.to_string())?;
            Ok(plan_variant(&setup, plan))
        })
        .collect::<Result<_, String>>()?;
    {
        let mut refs: Vec<&mut Variant> = all.iter_mut().collect();
        measure(&setup, &mut refs, rounds, SMALL_REPS, config);
    }
    let mut budgets: Vec<i64> = all.iter().map(|v| v.bytes).collect();
    budgets.sort_unstable();
    budgets.dedup();
    let mut rows = Vec::new();
    for budget in budgets {
        let plan = Plan::for_budget(&profile, budget).map_err(|e| e.to_string())?;
        let label = plan_label(&plan);
        let plan_index = all
            .iter()
            .position(|v| v.label == label)
            .ok_or(format!("the plan {label} is not among the assignments"))?;
        let best = (0..all.len())
            .filter(|&i| all[i].bytes <= budget)
            .min_by(|&a, &b| all[a].median().total_cmp(&all[b].median()))
            .expect("the plan's own assignment is within its budget");
        rows.push(BudgetRow {
            budget,
            plan: plan_index,
            best,
        });
    }
    Ok(SmallCheck {
        config,
        profile: profile.to_string(),
        rounds,
        assignments: all,
        rows,
    })
}

/// The rounds of the medium config's two measurements.
pub struct Rounds {
    /// Hand policies and plans.
    pub frontier: usize,
    /// The hand policies alone, for predicted against measured.
    pub accuracy: usize,
}

/// The hand policies, the plans at their bytes and `budgets` plans from
/// the least bytes to `none`'s, measured interleaved; identical plans run
/// once. Before them, between the profiles, the hand policies alone.
pub fn frontier(
    config: &'static str,
    cfg: Config,
    rounds: Rounds,
    budgets: usize,
    profile_runs: usize,
) -> Result<Frontier, String> {
    let setup = Setup::on(cfg, crate::device());
    // Each hand policy's bytes are measured once; its two sets of rounds
    // (alone, then with the plans) fill two copies.
    let mut accuracy: Vec<Variant> = POLICIES
        .into_iter()
        .map(|p| hand_variant(&setup, p))
        .collect();
    // Three profiles in this process, each followed by a third of the hand
    // policies' own rounds: the predictions and the measurements they are
    // checked against then share the same stretches of the machine's
    // speed, which drifts by a third within an hour on a shared host. The
    // plans come from the first profile.
    let mut profiles: Vec<planner::Profile> = Vec::new();
    for i in 0..3 {
        eprintln!("bench: planner, {config}, profile {}/3", i + 1);
        profiles.push(profile(&setup, profile_runs)?);
        let share = rounds.accuracy * (i + 1) / 3 - rounds.accuracy * i / 3;
        if share > 0 {
            let mut refs: Vec<&mut Variant> = accuracy.iter_mut().collect();
            let what = format!("{config}, hand policies alone, after profile {}", i + 1);
            measure(&setup, &mut refs, share, MEDIUM_REPS, &what);
        }
    }
    for (v, p) in accuracy.iter_mut().zip(POLICIES) {
        if let Some((replay, spread)) = median_prediction(&profiles, p) {
            v.predicted_replay = Some(replay);
            v.predicted_spread = Some(spread);
        }
    }
    let profile = &profiles[0];
    let mut hand: Vec<Variant> = accuracy
        .iter()
        .map(|v| Variant {
            times: Vec::new(),
            ..v.clone()
        })
        .collect();
    for (v, p) in hand.iter_mut().zip(POLICIES) {
        if let Some(c) = hand_choices(profile, p) {
            let predicted = planner::predict(profile, &c);
            v.predicted_replay = Some(predicted.replay_ns as f64 / 1e9);
            v.predicted_spread = Some(predicted.spread_ns as f64 / 1e9);
        }
    }
    let mut plans: Vec<Variant> = Vec::new();
    let mut keys: Vec<Vec<Choice>> = Vec::new();
    let mut index_of = |plan: Plan, plans: &mut Vec<Variant>| {
        let key = choices_of(&plan);
        match keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                keys.push(key);
                plans.push(plan_variant(&setup, plan));
                plans.len() - 1
            }
        }
    };
    let mut at_hand = Vec::new();
    let mut all_budgets = Vec::new();
    for h in &hand {
        let plan = Plan::for_budget(profile, h.bytes).map_err(|e| e.to_string())?;
        at_hand.push(index_of(plan, &mut plans));
        all_budgets.push(h.bytes);
    }
    let least = Plan::minimum(profile).predicted.kept_bytes;
    let most = hand.iter().map(|h| h.bytes).max().unwrap_or(least);
    let mut sweep = Vec::new();
    for i in 0..budgets {
        let budget = least + (most - least) * i as i64 / (budgets as i64 - 1).max(1);
        all_budgets.push(budget);
        let plan = Plan::for_budget(profile, budget).map_err(|e| e.to_string())?;
        let k = index_of(plan, &mut plans);
        if !sweep.contains(&k) {
            sweep.push(k);
        }
    }
    {
        let mut refs: Vec<&mut Variant> = hand.iter_mut().chain(plans.iter_mut()).collect();
        measure(&setup, &mut refs, rounds.frontier, MEDIUM_REPS, config);
    }
    let hand_as_plan = POLICIES
        .into_iter()
        .map(|p| hand_label(p, profile.layers.len()))
        .collect();
    all_budgets.sort_unstable();
    all_budgets.dedup();
    Ok(Frontier {
        profile_runs,
        config,
        hand_as_plan,
        profile_costs: profiles.iter().map(costs_line).collect(),
        agreement: agreement(&profiles, &all_budgets)?,
        profile: profile.to_string(),
        rounds: rounds.frontier,
        hand,
        accuracy,
        accuracy_rounds: rounds.accuracy,
        plans,
        at_hand,
        sweep,
    })
}

/// Per-round ratios of two variants' times.
pub fn round_ratios(a: &Variant, b: &Variant) -> Vec<f64> {
    ratios(&a.times, &b.times)
}

/// The fastest hand policy (by median) keeping at most `bytes`, if any.
pub fn best_hand_within(f: &Frontier, bytes: i64) -> Option<&Variant> {
    f.hand
        .iter()
        .filter(|h| h.bytes <= bytes)
        .min_by(|a, b| a.median().total_cmp(&b.median()))
}
