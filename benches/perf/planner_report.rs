//! The markdown of section 4 (the planner) of docs/performance.md.

use crate::accuracy::extra_over;
use crate::planner::{
    best_hand_within, round_ratios, Frontier, SmallCheck, MEDIUM_REPS, SMALL_REPS,
};
use crate::report::ms_with;
use crate::stats::{summary, Summary};
use crate::variant::Variant;
use remat_reference::numbers::mib;
use std::fmt::Write;

/// The small config's bound: the plan's measured step time within this
/// factor of the fastest measured assignment in its budget, as the median
/// of the per-round ratios (both run in every round, so a change of the
/// machine's speed between rounds cancels; a ratio of the two medians
/// does not, and on a machine whose speed moves between two levels it
/// compares a step of one level with a step of the other).
pub const SMALL_BOUND: f64 = 1.05;

fn ms(v: &Variant) -> String {
    ms_with(summary(&v.times), 2)
}

fn ratio(s: Summary) -> String {
    format!("{:.3}× ({:.3}–{:.3})", s.median, s.q1, s.q3)
}

fn kib(b: i64) -> String {
    format!("{:.1} KiB", b as f64 / 1024.0)
}

fn bytes_exact(vs: &[&Variant]) -> (usize, usize) {
    let plans: Vec<_> = vs.iter().filter(|v| v.predicted_bytes.is_some()).collect();
    let equal = plans
        .iter()
        .filter(|v| v.predicted_bytes == Some(v.bytes))
        .count();
    (equal, plans.len())
}

pub fn render(o: &mut String, s: &SmallCheck, f: &Frontier, svg: &str) {
    let _ = writeln!(
        o,
        "\n## 4. Planner (docs/planner.md)\n\n\
         The reference model's `Auto` regions and blocks (`ModelPolicy::Auto`) under plans from \
         `Plan::for_budget`, profiled once per config (`planner::profile_with`, {} timing runs), \
         one intra-op thread. Step time is forward + backward as in section 1, all variants of a \
         config interleaved round by round (rotating order, a first untimed round). Bytes are \
         measured with `planner::measure_kept_bytes` (remat's count: what checkpoints keep, \
         their inputs, and what autograd saved outside them) and compared with the plan's \
         prediction.\n",
        f.profile_runs
    );

    // Small: brute force.
    let all: Vec<&Variant> = s.assignments.iter().collect();
    let (equal, plans) = bytes_exact(&all);
    let _ = writeln!(
        o,
        "### {} config: the plan against every assignment\n\n\
         Every one of the {} assignments the planner considers (per block: not checkpointed, \
         or checkpointed with each of its 2 regions `S`ave or `R`ecompute) is measured: {} \
         rounds, each round's value the least of {} steps. For each distinct budget (the bytes of \
         some assignment), the plan's choice is compared with the fastest assignment measured \
         within that budget; the ratio is taken per round. Bytes predicted = measured for {equal} \
         of {plans} assignments. Labels list the blocks in order. The profile the plans \
         come from:\n\n```text\n{}```\n",
        s.config,
        s.assignments.len(),
        s.rounds,
        SMALL_REPS,
        s.profile
    );
    let _ = writeln!(
        o,
        "| budget | plan | plan's step | fastest within budget | its step | plan ÷ fastest |\n\
         | --- | --- | --- | --- | --- | --- |"
    );
    let mut worst: f64 = 0.0;
    for row in &s.rows {
        let (p, b) = (&s.assignments[row.plan], &s.assignments[row.best]);
        let r = summary(&round_ratios(p, b));
        worst = worst.max(r.median);
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            kib(row.budget),
            p.label,
            ms(p),
            if row.plan == row.best {
                "(the plan)".to_string()
            } else {
                b.label.clone()
            },
            ms(b),
            ratio(r)
        );
    }
    let _ = writeln!(
        o,
        "\nWorst plan ÷ fastest over the budgets (the median of the per-round ratios): \
         {worst:.3}× (bound: {SMALL_BOUND:.2}×, {}).\n",
        if worst <= SMALL_BOUND {
            "met"
        } else {
            "NOT met"
        }
    );

    // Medium: hand policies and the frontier.
    let everything: Vec<&Variant> = f.plans.iter().collect();
    let (equal, plans) = bytes_exact(&everything);
    let _ = writeln!(
        o,
        "### {} config: plans against the hand policies\n\n\
         {} rounds, each round's value the least of {} steps. Bytes predicted = measured for \
         {equal} of {plans} plans. The profile:\n\n```text\n{}```\n",
        f.config, f.rounds, MEDIUM_REPS, f.profile
    );
    let _ = writeln!(
        o,
        "| hand policy | bytes | step | plan at those bytes | plan's bytes | plan's step | plan ÷ hand |\n\
         | --- | --- | --- | --- | --- | --- | --- |"
    );
    for ((h, &i), as_plan) in f.hand.iter().zip(&f.at_hand).zip(&f.hand_as_plan) {
        let p = &f.plans[i];
        let same = if p.label == *as_plan {
            " (the same assignment)"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {}{same} | {} | {} | {} |",
            h.label,
            mib(h.bytes),
            ms(h),
            p.label,
            mib(p.bytes),
            ms(p),
            ratio(summary(&round_ratios(p, h)))
        );
    }
    let _ = writeln!(
        o,
        "\nWhere the plan is the hand policy's own assignment, both run the same work (the \
         plan through `Auto` regions and an active plan) and the ratio shows the measurement's \
         noise."
    );
    render_profiles(o, f);
    render_accuracy(o, f);
    let _ = writeln!(
        o,
        "\nThe budget sweep (from the least bytes possible to `none`'s; identical plans once), \
         each against the fastest hand policy that keeps no more:\n\n\
         | plan | bytes | predicted replay | step | fastest hand policy within | its step | plan ÷ it |\n\
         | --- | --- | --- | --- | --- | --- | --- |"
    );
    let mut sweep: Vec<&Variant> = f.sweep.iter().map(|&i| &f.plans[i]).collect();
    sweep.sort_by_key(|v| v.bytes);
    let mut below = Vec::new();
    for p in sweep {
        let hand = best_hand_within(f, p.bytes);
        let r = hand.map(|h| summary(&round_ratios(p, h)));
        if let (Some(h), Some(r)) = (hand, r) {
            if r.q3 < 1.0 {
                below.push(format!("{} ({}, {})", p.label, mib(p.bytes), h.label));
            }
        }
        let _ = writeln!(
            o,
            "| {} | {} | {:.1} ms | {} | {} | {} | {} |",
            p.label,
            mib(p.bytes),
            p.predicted_replay.unwrap_or(0.0) * 1e3,
            ms(p),
            hand.map_or("none keeps so little".into(), |h| h.label.clone()),
            hand.map_or("–".into(), ms),
            r.map_or("–".into(), ratio)
        );
    }
    let _ = writeln!(
        o,
        "\nPlans strictly below the hand policies' frontier (every quartile of the per-round \
         ratio under 1): {}.\n\n![step time against bytes kept]({svg})\n",
        if below.is_empty() {
            "none in this run".to_string()
        } else {
            below.join("; ")
        }
    );
}

/// Three profiles of the same model in one process: their costs, and the
/// plan each gives at the hand policies' bytes and the sweep's budgets.
fn render_profiles(o: &mut String, f: &Frontier) {
    let agree = f.agreement.iter().filter(|a| a.agrees()).count();
    let _ = writeln!(
        o,
        "\n#### Three profiles of the model\n\n\
         The {} model profiled three times in this process (`profile_with`, {} timing runs each; \
         the plans above come from the first). Costs per block, median ± spread (half the \
         interquartile range over the calibration's rounds):\n",
        f.config, f.profile_runs
    );
    for (i, line) in f.profile_costs.iter().enumerate() {
        let _ = writeln!(o, "- profile {}: {line}", i + 1);
    }
    let _ = writeln!(
        o,
        "\nThe plans agree at {agree} of {} budgets.\n\n\
         | budget | profile 1 | profile 2 | profile 3 | agree |\n| --- | --- | --- | --- | --- |",
        f.agreement.len()
    );
    for a in &f.agreement {
        let _ = writeln!(
            o,
            "| {} | {} | {} |",
            mib(a.budget),
            a.labels.join(" | "),
            if a.agrees() { "yes" } else { "**no**" }
        );
    }
}

/// The time model against the measured step time over `none`: per hand
/// policy's assignment from the hand policies' own rounds, per plan of the
/// sweep from the frontier's rounds.
fn render_accuracy(o: &mut String, f: &Frontier) {
    let none_of = |vs: &'_ [Variant]| vs.iter().position(|h| h.label == "`none`");
    let (Some(acc_none), Some(none)) = (none_of(&f.accuracy), none_of(&f.hand)) else {
        return;
    };
    let _ = writeln!(
        o,
        "\n#### Predicted against measured\n\n\
         Predicted: the replay time for the assignment, ± its spread; for a hand policy the \
         median of the three profiles' predictions, for a plan the first profile's (the one \
         it comes from). Measured: per round, the variant's step time minus `none`'s in the \
         same round (median and interquartile range). The hand policies' rows come from {} \
         rounds of the four hand policies alone, run in three stretches, one right after each \
         profile, so that the predictions and what they are checked against share the \
         machine's stretches of speed (each round's value the least of {} steps); the plans' \
         rows from the {} rounds above.\n\n\
         | assignment | predicted extra | measured extra over `none` | measured ÷ predicted |\n\
         | --- | --- | --- | --- |",
        f.accuracy_rounds, MEDIUM_REPS, f.rounds
    );
    let mut sweep: Vec<&Variant> = f.sweep.iter().map(|&i| &f.plans[i]).collect();
    sweep.sort_by_key(|v| v.bytes);
    let hand = f
        .accuracy
        .iter()
        .zip(&f.hand_as_plan)
        .filter(|(h, _)| h.label != "`none`")
        .map(|(h, label)| (format!("{} ({label})", h.label), h, &f.accuracy[acc_none]));
    let plans = sweep
        .into_iter()
        .map(|p| (format!("plan {}", p.label), p, &f.hand[none]));
    for (name, v, none) in hand.chain(plans) {
        let (Some(p), Some(s)) = (v.predicted_replay, v.predicted_spread) else {
            continue;
        };
        let m = extra_over(v, none);
        let _ = writeln!(
            o,
            "| {name} | {:.2} ± {:.2} ms | {:.2} ms ({:.2}–{:.2}) | {} |",
            p * 1e3,
            s * 1e3,
            m.median * 1e3,
            m.q1 * 1e3,
            m.q3 * 1e3,
            if p > 0.0 {
                format!("{:.2}", m.median / p)
            } else {
                "–".into()
            }
        );
    }
}
