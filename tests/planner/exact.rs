//! Predictions equal measurements, and the solver is exact (brute force).

use crate::{serial, Planned, Setup};
use remat::planner::{measure_kept_bytes, predict, Choice, Estimate, Plan, Prediction};
use remat_reference::model::{ModelPolicy, SMALL};
use remat_reference::testing::assignments;

#[test]
fn repeated_layers_are_profiled_once() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    assert_eq!(profile.layers, ["layers.0", "layers.1"]);
    assert_eq!(profile.kinds.len(), 1, "{profile}");
    let kind = &profile.kinds[0];
    assert_eq!(kind.members, [0, 1]);
    assert_eq!(kind.regions, ["attention", "mlp"]);
    assert!(kind.can_disable);
    assert_eq!(kind.choices.len(), 5);
    // One timing run, one run per choice but the baseline, the
    // calibration (a warm-up step, and per round (one) a step with every
    // block whole, one with the kind's blocks checkpointed, all saved, and
    // one per region recomputed alone), then two steps whose backward is
    // traced (the baseline's levels of the predicted peak) and one per
    // choice but the baseline (what each changes in its own block's).
    assert_eq!(profile.runs, 1 + 4 + (1 + 1 + 1 + 2) + 2 + 4);
    // On glibc the levels are measured: the backward starts above what the
    // forward kept, and every block's backward holds at least its input.
    if let Some(levels) = &profile.backward {
        assert!(
            levels.gaps[2].unwrap() >= profile.baseline_bytes,
            "{levels:?}"
        );
        assert!(
            levels
                .layers
                .iter()
                .all(|&l| l.unwrap() >= kind.input_bytes),
            "{levels:?}"
        );
    }
    assert!(kind.replay_measured, "{profile}");
    assert_eq!(kind.region_cost.len(), 2);
    let (b, t, d) = (SMALL.b, SMALL.t, SMALL.d);
    assert_eq!(kind.input_sizes, [vec![b, t, d]]);
    assert_eq!(kind.input_bytes, b * t * d * 4);
    // Both regions keep their output at least when saved.
    assert!(
        kind.save_bytes.iter().all(|&s| s >= b * t * d * 4),
        "{profile}"
    );
    // Not checkpointed, a block keeps more than any checkpointed choice.
    let whole = kind
        .choices
        .iter()
        .find(|c| !c.choice.checkpointed)
        .unwrap();
    assert!(
        kind.choices.iter().all(|c| c.bytes <= whole.bytes),
        "{profile}"
    );
    assert_eq!(whole.replay_ns, 0);
}

/// Every assignment the planner considers (all 25 on the small model): the
/// bytes measured under the plan are exactly the predicted ones.
#[test]
fn predicted_bytes_equal_measured_for_every_assignment() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    let all = assignments(&profile);
    assert_eq!(all.len(), 25);
    let mut distinct = std::collections::BTreeSet::new();
    for choices in all {
        let plan = Plan::from_choices(&profile, &choices).unwrap();
        let (loss, measured) = plan.scope(|| measure_kept_bytes(|| s.loss(ModelPolicy::Auto)));
        drop(loss);
        assert_eq!(measured, plan.predicted.kept_bytes, "{choices:?}\n{plan}");
        distinct.insert(measured);
    }
    // The assignments really differ in what they keep.
    assert!(distinct.len() >= 6, "{distinct:?}");
}

/// The hand policies are assignments too: the profile predicts their bytes
/// (measured through their own code paths) exactly.
#[test]
fn hand_policies_are_predicted_exactly() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    let index = |c: Choice| {
        profile.kinds[0]
            .choices
            .iter()
            .position(|x| x.choice == c)
            .unwrap()
    };
    let save = |attention, mlp| Choice {
        checkpointed: true,
        save: vec![attention, mlp],
        offload: vec![false; 2],
    };
    for (policy, choice) in [
        (ModelPolicy::None, Choice::whole(2)),
        (ModelPolicy::Full, save(false, false)),
        (ModelPolicy::Selective, save(true, false)),
        (ModelPolicy::SaveMlp, save(false, true)),
    ] {
        let c = index(choice);
        let predicted = predict(&profile, &[c, c]).kept_bytes;
        assert_eq!(s.measure(policy), predicted, "{policy:?}");
    }
    // Without a plan, `Auto` is `Full`: every block checkpointed, every
    // region recomputed.
    assert_eq!(s.measure(ModelPolicy::Auto), s.measure(ModelPolicy::Full));
    assert_eq!(s.measure(ModelPolicy::Auto), profile.baseline_bytes);
}

/// The solver against brute force over every assignment, for every budget
/// that separates two assignments: the planner's choice fits, and its
/// interval (replay ± spread) overlaps the fastest one's (the tie rule
/// itself is tested on synthetic profiles, tests/planner/stable.rs), for
/// kept bytes and for peak.
#[test]
fn the_plan_is_as_fast_as_the_fastest_within_budget() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    let predictions: Vec<_> = assignments(&profile)
        .iter()
        .map(|c| predict(&profile, c))
        .collect();
    let mut budgets: Vec<i64> = predictions
        .iter()
        .flat_map(|p| {
            [
                p.kept_bytes,
                p.peak_bytes,
                p.kept_bytes + 1,
                p.peak_bytes - 1,
            ]
        })
        .collect();
    budgets.sort_unstable();
    budgets.dedup();
    let limit = |p: &Prediction| p.replay_ns as i64 + p.spread_ns as i64;
    let low = |p: &Prediction| p.replay_ns as i64 - p.spread_ns as i64;
    for &budget in &budgets {
        let best_kept = predictions
            .iter()
            .filter(|p| p.kept_bytes <= budget)
            .min_by_key(|p| (p.replay_ns, p.kept_bytes));
        match (Plan::for_budget(&profile, budget), best_kept) {
            (Ok(plan), Some(best)) => {
                assert!(plan.predicted.kept_bytes <= budget);
                assert!(
                    low(&plan.predicted) <= limit(best),
                    "budget {budget}\n{plan}"
                );
            }
            (Err(_), None) => {}
            (plan, best) => panic!("budget {budget}: {plan:?} vs brute force {best:?}"),
        }
        let best_peak = predictions
            .iter()
            .filter(|p| p.peak_bytes <= budget)
            .min_by_key(|p| (p.replay_ns, p.peak_bytes));
        match (Plan::for_peak_budget(&profile, budget), best_peak) {
            (Ok(plan), Some(best)) => {
                assert!(plan.predicted.peak_bytes <= budget);
                assert!(
                    low(&plan.predicted) <= limit(best),
                    "peak budget {budget}\n{plan}"
                );
            }
            (Err(_), None) => {}
            (plan, best) => panic!("peak budget {budget}: {plan:?} vs brute force {best:?}"),
        }
    }
}

/// The calibration times forward + backward, but its backward computes
/// gradients for the checkpoints' inputs only: every parameter's `.grad`
/// is still undefined after profiling. A checkpointed choice costs the
/// kind's checkpoint cost plus the cost of each region it recomputes, with
/// the spreads added; a whole one costs nothing.
#[test]
fn calibration_leaves_parameter_gradients_alone() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let params = s.model.vs.trainable_variables();
    assert!(!params.is_empty());
    assert!(params.iter().all(|p| !p.grad().defined()));
    let profile = s.profile();
    for p in &params {
        assert!(!p.grad().defined(), "the profiler accumulated a gradient");
    }
    let kind = &profile.kinds[0];
    assert!(kind.replay_measured, "{profile}");
    for c in &kind.choices {
        // docs/semantics.md, rule C17: the measured replays already
        // stopped early, so the tail is not taken off again (it is, for a
        // kind timed by its forward: profile.rs's unit tests).
        let expected = if c.choice.checkpointed {
            (0..kind.regions.len())
                .filter(|&r| !c.choice.save[r])
                .fold(kind.checkpoint_cost, |sum, r| sum + kind.region_cost[r])
        } else {
            Estimate::exact(0)
        };
        assert_eq!(
            (c.replay_ns, c.spread_ns),
            (expected.ns, expected.spread_ns),
            "{}",
            c.choice
        );
    }
}

/// The calibration costs a region by its replay inside the backward, not
/// by its forward: a region that sleeps 30 ms only when it is replayed
/// costs at least that; a region that does not, and the checkpoint's own
/// replay, cost well under it.
#[test]
fn a_region_costs_what_its_replay_takes() {
    use remat::{checkpoint, region, Policy};
    use std::time::Duration;
    use tch::{Kind, Tensor};
    let _serial = serial();
    let w = Tensor::ones([64], tch::kind::FLOAT_CPU).set_requires_grad(true);
    let forward = || {
        let y = checkpoint("layers.0").auto().call(&w, |w| {
            let a = region("slow", Policy::Auto).call(&w, |w| {
                if remat::is_recomputing() {
                    std::thread::sleep(Duration::from_millis(30));
                }
                (w * 2).exp()
            });
            let b = region("fast", Policy::Auto).call(&a, |a| a.sin());
            remat::recompute_needs_tensor(&b);
            b.cos()
        });
        y.sum(Kind::Float)
    };
    let profile = remat::planner::profile_with(forward, 3).unwrap();
    let kind = &profile.kinds[0];
    assert!(kind.replay_measured, "{profile}");
    assert_eq!(kind.regions, ["slow", "fast"]);
    let ms = |e: Estimate| e.ns as f64 / 1e6;
    assert!(ms(kind.region_cost[0]) >= 29.0, "{profile}");
    assert!(ms(kind.region_cost[1]) < 10.0, "{profile}");
    assert!(ms(kind.checkpoint_cost) < 10.0, "{profile}");
    // The forward never slept: forward times could not have found it.
    assert!(kind.region_ns[0] < 10_000_000, "{profile}");
}
