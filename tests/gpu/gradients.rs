//! Gradients on CUDA, bitwise equal to the model without checkpoints:
//! under every hand policy, under a plan for a budget (profiled on the
//! device), and under CUDA autocast in fp16 and bf16 (rule A2).

use crate::{assert_same_grads, check, run};
use remat::planner::{self, Plan};
use remat_reference::model::{batch_on, Model, ModelPolicy, MEDIUM, POLICIES};
use tch::{Kind, Tensor};

fn plain(f: &dyn Fn() -> Tensor) -> Tensor {
    f()
}

#[test]
fn gradients_bitwise_under_every_policy_and_a_plan() {
    check(
        "gradients_bitwise_under_every_policy_and_a_plan",
        |device| {
            let model = Model::on(MEDIUM, 0, device);
            let (x, y) = batch_on(MEDIUM, 1, device);
            let (loss, want) = run(&model, &x, &y, ModelPolicy::None, &plain);
            for policy in POLICIES {
                let (l, got) = run(&model, &x, &y, policy, &plain);
                assert!(l == loss, "{policy:?}: the loss differs from none's");
                assert_same_grads(&got, &want, &format!("{policy:?}"));
            }
            let profile = planner::profile(|| model.loss(&x, &y, ModelPolicy::Auto)).unwrap();
            let least = Plan::minimum(&profile).predicted.kept_bytes;
            let (graph, most) =
                planner::measure_kept_bytes(|| model.loss(&x, &y, ModelPolicy::None));
            drop(graph);
            let plan = Plan::for_budget(&profile, least + (most - least) / 2).unwrap();
            let (l, got) = run(&model, &x, &y, ModelPolicy::Auto, &|f| plan.scope(f));
            assert!(l == loss, "the plan's loss differs from none's");
            assert_same_grads(&got, &want, &format!("under\n{plan}"));
            format!(
                "4 policies and a plan of {} kept bytes",
                plan.predicted.kept_bytes
            )
        },
    );
}

fn autocast_on(kind: Kind, name: &str) {
    check(name, |device| {
        let model = Model::on(MEDIUM, 0, device);
        let (x, y) = batch_on(MEDIUM, 1, device);
        let under = |f: &dyn Fn() -> Tensor| remat::autocast(device, kind, f);
        let (loss, want) = run(&model, &x, &y, ModelPolicy::None, &under);
        for policy in POLICIES {
            let (l, got) = run(&model, &x, &y, policy, &under);
            assert!(
                l == loss,
                "{policy:?} under {kind:?} autocast: the loss differs"
            );
            assert_same_grads(&got, &want, &format!("{policy:?} under {kind:?} autocast"));
        }
        format!("4 policies under CUDA autocast {kind:?}")
    });
}

#[test]
fn autocast_fp16_gradients_bitwise() {
    autocast_on(Kind::Half, "autocast_fp16_gradients_bitwise");
}

#[test]
fn autocast_bf16_gradients_bitwise() {
    autocast_on(Kind::BFloat16, "autocast_bf16_gradients_bitwise");
}
