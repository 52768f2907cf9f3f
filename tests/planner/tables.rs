//! Policy tables over the reference model (docs/policies.md): a table
//! reproduces each hand policy exactly, and a plan's table the plan.

use crate::common::assert_bitwise;
use crate::{grads, serial, Planned, Setup};
use remat::planner::PolicyTable;
use remat::planner::{measure_kept_bytes, Plan};
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
    for ((name, _), (g, e)) in s
        .model
        .named_parameters()
        .iter()
        .zip(grads(s).iter().zip(expected))
    {
        assert_bitwise(g, e, &format!("{name} under {what}"));
    }
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
