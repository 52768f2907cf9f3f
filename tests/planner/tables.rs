//! Policy tables over the reference model (docs/policies.md): a table
//! reproduces each hand policy exactly, and a plan's table the plan.

use crate::{assert_grads, grads, serial, Planned, Setup};
use remat::planner::{measure_kept_bytes, Plan};
use remat::policies::{self, PolicyTable};
use remat::Policy;
use remat_reference::model::{ModelPolicy, SMALL};

/// The table that gives `ModelPolicy::Auto` the behaviour of `hand`.
fn table_of(hand: ModelPolicy) -> PolicyTable {
    let table = match hand {
        ModelPolicy::None => PolicyTable::new().checkpoint("layers.*", false),
        ModelPolicy::Full => PolicyTable::save_only(Vec::<String>::new()),
        ModelPolicy::Selective => PolicyTable::save_only(["attention"]),
        ModelPolicy::SaveMlp => PolicyTable::save_all_but(["attention"]),
        ModelPolicy::Auto => unreachable!("not a hand policy"),
    };
    // A pattern that matched nothing would fail the run.
    table.strict(true)
}

/// Gradients and bytes kept of `Auto` under `table`, against `expected`
/// gradients and `bytes` (the hand policy's, measured through its own
/// code path).
fn check(s: &Setup, table: &PolicyTable, expected: &[tch::Tensor], bytes: i64, what: &str) {
    let (loss, kept) = table
        .scope(|| measure_kept_bytes(|| s.loss(ModelPolicy::Auto)))
        .unwrap();
    drop(loss);
    assert_eq!(kept, bytes, "{what}: bytes kept");
    s.model.zero_grad();
    table
        .scope(|| s.loss(ModelPolicy::Auto))
        .unwrap()
        .backward();
    assert_grads(s, expected, what);
}

#[test]
fn a_table_reproduces_each_hand_policy_exactly() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let mut seen = Vec::new();
    for hand in remat_reference::model::POLICIES {
        s.model.zero_grad();
        s.loss(hand).backward();
        let expected = grads(&s);
        let bytes = s.measure(hand);
        check(&s, &table_of(hand), &expected, bytes, &format!("{hand:?}"));
        seen.push(bytes);
    }
    seen.dedup();
    assert_eq!(
        seen.len(),
        4,
        "the hand policies keep different bytes: {seen:?}"
    );
}

#[test]
fn a_plans_table_decides_as_the_plan() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    let least = Plan::minimum(&profile).predicted.kept_bytes;
    let most = s.measure(ModelPolicy::None);
    for step in [0, 2, 4, 6] {
        let plan = Plan::for_budget(&profile, least + (most - least) * step / 6).unwrap();
        s.model.zero_grad();
        plan.scope(|| s.loss(ModelPolicy::Auto)).backward();
        let expected = grads(&s);
        let table = plan.to_table().strict(true);
        check(
            &s,
            &table,
            &expected,
            plan.predicted.kept_bytes,
            &format!("{plan}"),
        );
    }
}

#[test]
fn the_listing_names_every_checkpoint_and_region_with_its_bytes() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let list = policies::regions(|| s.loss(ModelPolicy::Auto)).unwrap();
    assert_eq!(
        list.qualified_names(),
        [
            "layers.0::attention",
            "layers.0::mlp",
            "layers.1::attention",
            "layers.1::mlp"
        ]
    );
    assert!(list.checkpoints.iter().all(|c| c.auto && c.checkpointed));
    let profile = s.profile();
    let kind = &profile.kinds[0];
    for c in &list.checkpoints {
        for (r, expected) in c.regions.iter().zip(&kind.save_bytes) {
            assert_eq!(r.declared, Policy::Auto);
            assert_eq!(r.policy, Policy::Recompute, "no table is active");
            // The planner's measure of the region saved alone (each region
            // keeps its own output: nothing is shared between them).
            assert_eq!(r.save_bytes, Some(*expected), "{}\n{list}", r.qualified);
        }
    }
    // Under a table, "now" is the table's decision.
    let table = PolicyTable::new()
        .save("layers.1::mlp")
        .checkpoint("layers.0", false);
    let active = table.activate().unwrap();
    let list = policies::regions(|| s.loss(ModelPolicy::Auto)).unwrap();
    drop(active);
    assert!(!list.checkpoints[0].checkpointed && list.checkpoints[1].checkpointed);
    assert_eq!(list.checkpoints[1].regions[1].policy, Policy::Save);
    assert_eq!(list.checkpoints[1].regions[0].policy, Policy::Recompute);
    let text = list.to_string();
    assert!(
        text.contains("layers.0                         auto()     off"),
        "{text}"
    );
    // A hand policy's fixed regions: declared as written, no choice to list.
    let list = policies::regions(|| s.loss(ModelPolicy::Selective)).unwrap();
    let layer = &list.checkpoints[0];
    assert!(!layer.auto);
    assert_eq!(layer.regions[0].declared, Policy::Save);
    assert!(layer.regions[0].save_bytes.unwrap() > 0);
    assert_eq!(layer.regions[1].save_bytes, None);
}

#[test]
fn plan_files_load_as_tables_and_tables_round_trip() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = s.profile();
    let list = policies::regions(|| s.loss(ModelPolicy::Auto)).unwrap();
    let least = Plan::minimum(&profile).predicted.kept_bytes;
    let plan =
        Plan::for_budget(&profile, least + (s.measure(ModelPolicy::None) - least) / 2).unwrap();
    let dir = std::env::temp_dir();
    let plan_path = dir.join(format!("remat-table-plan-{}.json", std::process::id()));
    plan.save_file(&plan_path).unwrap();
    let from_plan = PolicyTable::load_for(&plan_path, &list).unwrap();
    std::fs::remove_file(&plan_path).unwrap();
    assert_eq!(from_plan, plan.to_table());
    // Written as a table file and read back: the same table, the plan's run.
    let path = dir.join(format!("remat-table-{}.json", std::process::id()));
    from_plan.save_file(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"format\": \"remat-policy/1\""), "{text}");
    let loaded = PolicyTable::load_for(&path, &list).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(loaded, from_plan);
    s.model.zero_grad();
    plan.scope(|| s.loss(ModelPolicy::Auto)).backward();
    let expected = grads(&s);
    check(
        &s,
        &loaded.strict(true),
        &expected,
        plan.predicted.kept_bytes,
        "the loaded table",
    );
}

#[test]
fn a_table_file_naming_unknown_regions_is_refused_with_the_nearest() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let list = policies::regions(|| s.loss(ModelPolicy::Auto)).unwrap();
    let path = std::env::temp_dir().join(format!("remat-table-bad-{}.json", std::process::id()));
    let table = PolicyTable::new()
        .save("layers.*::atention")
        .save("mlp")
        .checkpoint("layers.7", false);
    table.save_file(&path).unwrap();
    let err = PolicyTable::load_for(&path, &list).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        err,
        format!(
            "policy table: {}: 2 rule(s) match nothing in the model: `layers.*::atention: save` \
             (nearest: `layers.0::attention`, `layers.1::attention`), `layers.7: off` \
             (nearest: `layers.0`, `layers.1`); the model has 2 `auto()` checkpoint(s) and 4 \
             `auto` region(s) (`policies::regions` lists them)",
            path.display()
        )
    );
    let err = PolicyTable::from_json(r#"{"format": "remat-policy/9", "rules": []}"#).unwrap_err();
    assert!(err.to_string().contains("reads `remat-policy/1`"), "{err}");
}
