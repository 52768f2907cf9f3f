//! Errors of the planner, by their messages.

use crate::common::message;
use crate::{serial, Planned, Setup};
use remat::planner::{Plan, Target};
use remat_reference::model::{Config, ModelPolicy, SMALL};
use std::panic::{catch_unwind, AssertUnwindSafe};

#[test]
fn a_budget_below_the_minimum_states_the_minimum() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    let least = Plan::minimum(&profile).predicted.kept_bytes;
    assert_eq!(least, profile.baseline_bytes, "all recomputed keeps least");
    let err = Plan::for_budget(&profile, least - 1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("is below the minimum possible")
            && err.contains(&format!("({least} bytes)"))
            && err.contains("every planned block checkpointed and every `auto` region recomputed"),
        "{err}"
    );
    assert!(Plan::for_budget(&profile, least).is_ok());
    // The least peak budget that works, by bisection.
    let (mut lo, mut hi) = (0i64, s.measure(ModelPolicy::None) * 4);
    assert!(Plan::for_peak_budget(&profile, hi).is_ok());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if Plan::for_peak_budget(&profile, mid).is_ok() {
            hi = mid
        } else {
            lo = mid + 1
        }
    }
    let least_peak = lo;
    let err = Plan::for_peak_budget(&profile, least_peak - 1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("below the minimum possible predicted peak")
            && err.contains(&format!("({least_peak} bytes)")),
        "{err}"
    );
}

#[test]
fn a_plan_for_another_model_names_what_differs() {
    let _serial = serial();
    let small = Setup::new(SMALL);
    let profile = small.profile();
    let deeper = Setup::new(Config { l: 3, ..SMALL });
    let deeper_profile = deeper.profile();
    let plan = Plan::for_budget(&deeper_profile, i64::MAX / 4).unwrap();

    // Wrong layer count.
    let path = std::env::temp_dir().join(format!("remat-plan-3-{}.json", std::process::id()));
    plan.save_file(&path).unwrap();
    let err = Plan::load_for(&path, &profile).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(
        err.contains("the plan has 3 planned checkpoint(s), the model 2")
            && err.contains("not in the model: layers.2")
            && err.contains(&path.display().to_string()),
        "{err}"
    );

    // Unknown region name (in a plan that checkpoints, so regions run).
    let plan = Plan::minimum(&profile);
    let json = plan.to_json().replace("\"attention\"", "\"attn\"");
    let err = Plan::from_json(&json)
        .unwrap()
        .check(&profile)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("checkpoint `layers.0`")
            && err.contains("(unknown: attn)")
            && err.contains("(missing: attention)"),
        "{err}"
    );

    // Applied anyway, the forward refuses it, naming the region.
    let bad = Plan::from_json(&json).unwrap();
    let err = message(catch_unwind(AssertUnwindSafe(|| {
        bad.scope(|| small.loss(ModelPolicy::Auto))
    })));
    assert!(
        err.contains("layers.0::attention")
            && err.contains("no decision for this `auto` region")
            && err.contains("attn"),
        "{err}"
    );

    // A plan with fewer layers than the model: the forward names the
    // checkpoint it lacks.
    let mut short = Plan::for_budget(&profile, i64::MAX / 4).unwrap();
    short.layers.pop();
    let err = message(catch_unwind(AssertUnwindSafe(|| {
        short.scope(|| small.loss(ModelPolicy::Auto))
    })));
    assert!(
        err.contains("checkpoint `layers.1`")
            && err.contains("has no decision for checkpoint `layers.1`")
            && err.contains("covers 1 checkpoint(s): layers.0"),
        "{err}"
    );
    assert_eq!(short.target, Target::Kept);
}

#[test]
fn bad_plan_files_are_refused() {
    // Serial too: other tests read the heap.
    let _serial = crate::serial();
    let err = Plan::from_json("{ not json").unwrap_err().to_string();
    assert!(
        err.contains("cannot read the plan file") && err.contains("line 1"),
        "{err}"
    );
    let err = Plan::from_json(
        r#"{"format": "remat-plan/9", "target": "kept",
            "predicted": {"kept_bytes": 0, "peak_bytes": 0, "replay_ns": 0}, "checkpoints": []}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`remat-plan/9`"), "{err}");
    let err = Plan::from_json(
        r#"{"format": "remat-plan/1", "target": "kept",
            "predicted": {"kept_bytes": 0, "peak_bytes": 0, "replay_ns": 0},
            "checkpoints": [{"name": "layers.0", "checkpoint": true,
                             "regions": {"mlp": "maybe"}}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("unknown variant `maybe`"), "{err}");
}
