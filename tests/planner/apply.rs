//! Plans at run time: gradients, where the decision is taken, plan files.

use crate::common::counter;
use crate::{assert_grads, grads, serial, Planned, Setup};
use remat::planner::{self, Choice, LayerPlan, Plan, Prediction, Target};
use remat::{checkpoint, recompute_needs_tensor, region, storage::WeakStorage, Policy};
use remat_reference::model::{ModelPolicy, SMALL};
use std::sync::atomic::Ordering::SeqCst;
use tch::{Kind, Tensor};

/// Gradients under the plans of several budgets (from the least to more
/// than `none` keeps) equal `none`'s bitwise.
#[test]
fn gradients_under_any_plan_equal_none_bitwise() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    s.model.zero_grad();
    s.loss(ModelPolicy::None).backward();
    let expected = grads(&s);
    let least = Plan::minimum(&profile).predicted.kept_bytes;
    let most = s.measure(ModelPolicy::None);
    let mut seen = Vec::new();
    for step in 0..=6 {
        let budget = least + (most - least) * step / 6;
        let plan = Plan::for_budget(&profile, budget).unwrap();
        s.model.zero_grad();
        plan.scope(|| s.loss(ModelPolicy::Auto)).backward();
        assert_grads(&s, &expected, &format!("\n{plan}"));
        seen.push(plan.layers.clone());
    }
    seen.dedup();
    assert!(seen.len() >= 3, "the budgets should give different plans");
}

/// The plan active on the forward decides; replay keeps that decision even
/// when it runs after the plan is gone, on another thread.
#[test]
fn replay_keeps_the_forward_decision() {
    let _serial = serial();
    let runs = counter();
    let r = runs.clone();
    let x = Tensor::ones([16], tch::kind::FLOAT_CPU).set_requires_grad(true);
    let plan = Plan {
        target: Target::Kept,
        budget: None,
        layers: vec![LayerPlan {
            name: "block".into(),
            regions: vec!["exp".into()],
            choice: Choice {
                checkpointed: true,
                save: vec![true],
                offload: vec![false],
            },
            inputs: None,
        }],
        predicted: Prediction {
            kept_bytes: 0,
            peak_bytes: 0,
            replay_ns: 0,
            spread_ns: 0,
        },
    };
    let (y, out) = {
        let _plan = plan.activate();
        let out = std::sync::Arc::new(std::sync::Mutex::new(None));
        let o = out.clone();
        let y = checkpoint("block").auto().call(&x, move |x| {
            r.fetch_add(1, SeqCst);
            let h = region("exp", Policy::Auto).call(&x, |x| (x * 2).exp());
            recompute_needs_tensor(&h);
            if !remat::is_recomputing() {
                *o.lock().unwrap() = WeakStorage::new(&h);
            }
            h.sin()
        });
        (y, out)
    };
    // An independent measure: `Save` keeps the region's output alive.
    let kept = out.lock().unwrap().take().unwrap();
    assert!(kept.is_alive());
    std::thread::spawn(move || y.sum(Kind::Float).backward())
        .join()
        .unwrap();
    assert_eq!(runs.load(SeqCst), 2);
    assert!(!kept.is_alive(), "backward releases it");
    let expected = (x.detach() * 2).exp();
    let expected = expected.cos() * &expected * 2;
    assert!(x.grad().allclose(&expected, 1e-6, 1e-6, false));

    // Without a plan the same code recomputes: nothing outlives the forward.
    let x = Tensor::ones([16], tch::kind::FLOAT_CPU).set_requires_grad(true);
    let out = std::sync::Arc::new(std::sync::Mutex::new(None));
    let o = out.clone();
    let y = checkpoint("block").auto().call(&x, move |x| {
        let h = region("exp", Policy::Auto).call(&x, |x| (x * 2).exp());
        recompute_needs_tensor(&h);
        if !remat::is_recomputing() {
            *o.lock().unwrap() = WeakStorage::new(&h);
        }
        h.sin()
    });
    assert!(!out.lock().unwrap().take().unwrap().is_alive());
    y.sum(Kind::Float).backward();
}

/// A plan that turns a checkpoint off runs it as plain code: no checkpoint
/// state is alive during the forward.
#[test]
fn a_plan_turns_checkpoints_off() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    let none = s.measure(ModelPolicy::None);
    let plan = Plan::for_budget(&profile, none).unwrap();
    assert!(plan.layers.iter().all(|l| !l.choice.checkpointed), "{plan}");
    assert_eq!(plan.predicted.replay_ns, 0);
    let loss = plan.scope(|| s.loss(ModelPolicy::Auto));
    assert_eq!(remat::diagnostics::live_checkpoints(), 0);
    drop(loss);
}

#[test]
fn plan_files_round_trip_and_reproduce_the_run() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    let least = Plan::minimum(&profile).predicted.kept_bytes;
    let plan =
        Plan::for_budget(&profile, least + (s.measure(ModelPolicy::None) - least) / 2).unwrap();
    let path = std::env::temp_dir().join(format!("remat-plan-{}.json", std::process::id()));
    plan.save_file(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"format\": \"remat-plan/1\""), "{text}");
    assert!(text.contains("\"layers.1\""), "{text}");
    let loaded = Plan::load_for(&path, &profile).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(loaded, plan);
    let (loss, measured) =
        loaded.scope(|| planner::measure_kept_bytes(|| s.loss(ModelPolicy::Auto)));
    drop(loss);
    assert_eq!(measured, plan.predicted.kept_bytes);
}
