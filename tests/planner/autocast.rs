//! Plans under mixed precision (docs/semantics.md, rule A2; docs/planner.md):
//! a profile taken under the autocast state the forward runs under predicts
//! the bytes kept under it, and a plan keeps gradients bitwise.

use crate::common::assert_bitwise;
use crate::{assert_grads, grads, serial, Planned, Setup};
use remat::planner::{measure_kept_bytes, Plan};
use remat::{autocast, AutocastGuard};
use remat_reference::model::{ModelPolicy, SMALL};
use tch::{Device, Kind};

fn bf16<R>(f: impl FnOnce() -> R) -> R {
    autocast(Device::Cpu, Kind::BFloat16, f)
}

#[test]
fn a_plan_profiled_under_bf16_autocast_keeps_its_bytes_and_the_gradients() {
    let _serial = serial();
    let s = Setup::new(SMALL);
    let profile = bf16(|| s.profile());
    assert_eq!(AutocastGuard::current(Device::Cpu), None);

    // Autocast changes what is kept (bf16 activations, and the bf16 copy of
    // each weight that `linear` saves): the profile must have seen that.
    let (fp32, half) = (
        s.measure(ModelPolicy::None),
        bf16(|| s.measure(ModelPolicy::None)),
    );
    assert_ne!(half, fp32, "autocast changed nothing the model keeps");
    assert_eq!(
        profile.baseline_bytes,
        bf16(|| s.measure(ModelPolicy::Full))
    );

    s.model.zero_grad();
    let expected_loss = bf16(|| s.loss(ModelPolicy::None));
    expected_loss.backward();
    let expected = grads(&s);
    let least = Plan::minimum(&profile).predicted.kept_bytes;
    for budget in [least, (least + half) / 2, half] {
        let plan = Plan::for_budget(&profile, budget).unwrap();
        let (_, measured) =
            bf16(|| plan.scope(|| measure_kept_bytes(|| s.loss(ModelPolicy::Auto))));
        assert_eq!(
            measured, plan.predicted.kept_bytes,
            "budget {budget}\n{plan}"
        );
        s.model.zero_grad();
        let loss = bf16(|| plan.scope(|| s.loss(ModelPolicy::Auto)));
        assert_bitwise(&loss, &expected_loss, &format!("loss under\n{plan}"));
        loss.backward();
        assert_grads(&s, &expected, &format!("\n{plan}"));
    }
}
