//! Kinds are a promise (docs/planner.md, "Kinds"): checkpoints grouped into
//! one kind keep the same bytes, so two `auto()` checkpoints alike in their
//! regions and input shapes but not in their bodies are kinds of their own,
//! and every plan's predicted bytes are the measured ones.

use crate::serial;
use remat::planner::{measure_kept_bytes, profile_with, Plan};
use remat::{checkpoint, region, Policy};
use remat_reference::testing::assignments;
use tch::{Kind, Tensor};

fn values(n: i64, seed: f64) -> Tensor {
    (Tensor::arange(n, tch::kind::FLOAT_CPU) * 1.7 + seed).sin()
}

/// Two blocks on the same input: the second's hidden layer is 8 times as
/// wide, so it keeps more for backward under every choice.
struct TwoBlocks {
    x: Tensor,
    narrow: Tensor,
    wide: (Tensor, Tensor),
}

impl TwoBlocks {
    fn new() -> TwoBlocks {
        TwoBlocks {
            x: values(8, 0.3).view([2, 4]),
            narrow: values(16, 1.0).view([4, 4]).set_requires_grad(true),
            wide: (
                values(128, 2.0).view([4, 32]).set_requires_grad(true),
                values(128, 3.0).view([32, 4]).set_requires_grad(true),
            ),
        }
    }

    fn loss(&self) -> Tensor {
        let w = self.narrow.shallow_clone();
        let a = checkpoint("blocks.0").auto().call(&self.x, move |x| {
            region("act", Policy::Auto).call(&x, |x| x.matmul(&w).tanh())
        });
        let (w1, w2) = (self.wide.0.shallow_clone(), self.wide.1.shallow_clone());
        let b = checkpoint("blocks.1").auto().call(&self.x, move |x| {
            region("act", Policy::Auto).call(&x, |x| x.matmul(&w1).tanh().matmul(&w2))
        });
        (a.exp() + b.exp()).sum(Kind::Float)
    }
}

#[test]
fn checkpoints_alike_but_for_their_bodies_are_kinds_of_their_own() {
    let _serial = serial();
    let model = TwoBlocks::new();
    let profile = profile_with(|| model.loss(), 1).unwrap();
    assert_eq!(profile.kinds.len(), 2, "{profile}");
    for choices in assignments(&profile) {
        let plan = Plan::from_choices(&profile, &choices).unwrap();
        let (loss, measured) = plan.scope(|| measure_kept_bytes(|| model.loss()));
        drop(loss);
        assert_eq!(measured, plan.predicted.kept_bytes, "{choices:?}\n{plan}");
    }
}

#[test]
// docs/semantics.md, E25: a plan applied to a model that changed since its
// profile fails naming the checkpoint, never runs with a wrong figure:
// other input shapes, and a block the plan does not know.
fn a_plan_for_another_model_fails_naming_the_checkpoint() {
    let _serial = serial();
    let model = TwoBlocks::new();
    let profile = profile_with(|| model.loss(), 1).unwrap();
    let plan = Plan::minimum(&profile);
    let failure = |model: &TwoBlocks| {
        let caught =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plan.scope(|| model.loss())));
        let payload = caught.expect_err("the plan ran on another model");
        payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default()
    };
    let mut wider = TwoBlocks::new();
    wider.x = values(12, 0.3).view([3, 4]);
    let message = failure(&wider);
    assert!(
        message.contains("checkpoint `blocks.0`")
            && message.contains("made for inputs of shapes [[2, 4]]")
            && message.contains("[[3, 4]]"),
        "{message}"
    );
    let mut renamed = plan.clone();
    renamed.layers[1].name = "blocks.9".into();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        renamed.scope(|| model.loss())
    }));
    let payload = caught.expect_err("a block the plan does not know ran");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("blocks.1"), "{message}");
}
