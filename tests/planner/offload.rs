//! Offload over the reference model (docs/semantics.md, rules O1-O4;
//! docs/policies.md): a table that offloads what a hand policy saves gives
//! its gradients bitwise and moves exactly what it keeps; a plan from a
//! profile taken with offload predicts its bytes, round-trips through the
//! file format, and a profile taken without offload never offloads.

use crate::common::assert_bitwise;
use crate::{assert_grads, grads, serial, Planned, Setup};
use remat::diagnostics::{saved_tensors_report, track_saved_tensors};
use remat::planner::{self, measure_kept_bytes, Plan};
use remat::policies::PolicyTable;
use remat::Policy;
use remat_reference::model::{ModelPolicy, SMALL};

/// Bytes kept (on the device) and offloaded under `table`, its gradients
/// against `expected`.
fn run(s: &Setup, table: &PolicyTable, expected: &[tch::Tensor], what: &str) -> (i64, i64) {
    let ((loss, kept), outside) = table
        .scope(|| track_saved_tensors(|| measure_kept_bytes(|| s.loss(ModelPolicy::Auto))))
        .unwrap();
    let offloaded = saved_tensors_report(Some(&outside)).offloaded_bytes();
    drop(loss);
    s.model.zero_grad();
    table
        .scope(|| s.loss(ModelPolicy::Auto))
        .unwrap()
        .backward();
    assert_grads(s, expected, what);
    (kept, offloaded)
}

#[test]
fn offloading_what_each_hand_policy_saves_keeps_its_gradients_and_moves_its_bytes() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let full = s.measure(ModelPolicy::Full);
    for (hand, table) in [
        (
            ModelPolicy::Full,
            PolicyTable::save_only(Vec::<String>::new()),
        ),
        (
            ModelPolicy::Selective,
            PolicyTable::save_and_offload_only(Vec::<String>::new(), ["attention"]),
        ),
        (
            ModelPolicy::SaveMlp,
            PolicyTable::new().offload("*::*").recompute("attention"),
        ),
    ] {
        s.model.zero_grad();
        s.loss(hand).backward();
        let expected = grads(&s);
        let kept = s.measure(hand);
        let (on_device, moved) = run(&s, &table.strict(true), &expected, &format!("{hand:?}"));
        // What the hand policy keeps beyond full's inputs is moved instead.
        assert_eq!(on_device, full, "{hand:?}: kept on the device");
        assert_eq!(moved, kept - full, "{hand:?}: offloaded");
    }
    // A mixed table: attention saved, the MLP offloaded.
    s.model.zero_grad();
    s.loss(ModelPolicy::Selective).backward();
    let expected = grads(&s);
    let selective = s.measure(ModelPolicy::Selective);
    let mixed = PolicyTable::save_and_offload_only(["attention"], ["mlp"]).strict(true);
    let (on_device, moved) = run(&s, &mixed, &expected, "attention saved, mlp offloaded");
    assert_eq!(on_device, selective);
    assert_eq!(
        moved,
        s.measure(ModelPolicy::SaveMlp) - full,
        "the MLP's saves"
    );
}

#[test]
fn the_planner_offloads_only_when_profiled_with_offload() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let full = s.measure(ModelPolicy::Full);
    let none = s.measure(ModelPolicy::None);
    // Without offload: no choice offloads, whatever the budget.
    let plain = s.profile();
    assert!(plain.copy.is_none());
    assert!(plain.kinds[0].choices.iter().all(|c| c.moved_bytes == 0));
    let plan = Plan::for_budget(&plain, full).unwrap();
    assert!(plan
        .layers
        .iter()
        .all(|l| !l.choice.offload.contains(&true)));

    let profile = planner::profile_with_offload(|| s.loss(ModelPolicy::Auto), 1).unwrap();
    let copy = profile.copy.expect("a measured copy cost");
    assert!(copy.cost.ns > 0);
    let kind = &profile.kinds[0];
    assert_eq!(kind.choices.len(), 1 + 9);
    // Offloading both regions keeps (measured) what the baseline keeps,
    // and moves what saving both keeps.
    let find = |offload: [bool; 2]| {
        kind.choices
            .iter()
            .find(|c| {
                c.choice.checkpointed
                    && c.choice.save == [true, true]
                    && c.choice.offload == offload
            })
            .unwrap()
    };
    let (both, twin) = (find([true, true]), find([false, false]));
    assert_eq!(both.bytes, 0, "relative to the baseline: {profile}");
    assert!(
        twin.bytes > 0 && both.moved_bytes == twin.bytes,
        "{profile}"
    );
    // Every plan predicts its bytes, offloading ones included, and gives
    // the gradients of the un-checkpointed model: plans for budgets, and
    // the plans that offload one region or both in every layer.
    s.model.zero_grad();
    s.loss(ModelPolicy::None).backward();
    let expected = grads(&s);
    let index = |offload: [bool; 2]| {
        kind.choices
            .iter()
            .position(|c| {
                c.choice.checkpointed
                    && c.choice.save == [true, true]
                    && c.choice.offload == offload
            })
            .unwrap()
    };
    let mut plans: Vec<Plan> = [0, 3, 6]
        .iter()
        .map(|step| Plan::for_budget(&profile, full + (none - full) * step / 6).unwrap())
        .collect();
    for offload in [[true, true], [false, true], [true, false]] {
        let choices = vec![index(offload); profile.layers.len()];
        plans.push(Plan::from_choices(&profile, &choices).unwrap());
    }
    for plan in &plans {
        let (loss, kept) = plan.scope(|| measure_kept_bytes(|| s.loss(ModelPolicy::Auto)));
        drop(loss);
        assert_eq!(kept, plan.predicted.kept_bytes, "{plan}");
        s.model.zero_grad();
        plan.scope(|| s.loss(ModelPolicy::Auto)).backward();
        for (g, e) in grads(&s).iter().zip(&expected) {
            assert_bitwise(g, e, &format!("{plan}"));
        }
        // The plan as a file and as a table: the same decisions.
        let back = Plan::from_json(&plan.to_json()).unwrap();
        assert_eq!(&back, plan);
        let table = plan.to_table();
        for l in plan.layers.iter().filter(|l| l.choice.checkpointed) {
            for r in &l.regions {
                assert_eq!(table.decide_region(&l.name, r), l.policy(r), "{plan}");
            }
        }
    }
    let offloading = &plans[3];
    assert!(offloading.to_json().contains(r#""attention": "offload""#));
    assert!(
        offloading.to_string().contains("attention: offload"),
        "{offloading}"
    );
    assert_eq!(offloading.layers[0].policy("mlp"), Some(Policy::OFFLOAD));
}
