//! The reference model written once with the macros, its policy chosen at
//! run time, gives bitwise the loss and gradients of the runtime-API model
//! under the same policy and of the model without checkpoints, under every
//! policy, on the small and the medium configuration.

use crate::common::assert_bitwise;
use remat_reference::model::{batch, Config, Model, ModelPolicy, MEDIUM, POLICIES, SMALL};
use tch::Tensor;

/// Runs forward and backward; returns the loss and every gradient by name.
fn run(model: &Model, f: impl FnOnce(&Model) -> Tensor) -> (Tensor, Vec<(String, Tensor)>) {
    let loss = f(model);
    loss.f_backward().expect("backward");
    let grads = model
        .named_parameters()
        .into_iter()
        .map(|(name, p)| (name, p.grad()))
        .collect();
    (loss.detach(), grads)
}

fn compare(cfg: Config) {
    tch::set_num_threads(1);
    let base = Model::new(cfg, 7);
    let (tokens, targets) = batch(cfg, 11);
    let none = run(&base.deep_copy(), |m| {
        m.loss_api(&tokens, &targets, ModelPolicy::None)
    });
    for policy in POLICIES {
        let macros = run(&base.deep_copy(), |m| m.loss(&tokens, &targets, policy));
        let api = run(&base.deep_copy(), |m| m.loss_api(&tokens, &targets, policy));
        for (reference, what) in [(&none, "none"), (&api, "the runtime API")] {
            let context = format!("{policy:?} vs {what}");
            assert_bitwise(&macros.0, &reference.0, &format!("loss, {context}"));
            assert_eq!(macros.1.len(), reference.1.len());
            for ((name, a), (_, b)) in macros.1.iter().zip(&reference.1) {
                assert!(a.defined(), "{name}: no gradient ({context})");
                assert_bitwise(a, b, &format!("{name}, {context}"));
            }
        }
    }
}

#[test]
// docs/dsl.md, rules V1-V2; docs/reference-model.md, "Policies".
fn every_run_time_policy_matches_on_the_small_config() {
    compare(SMALL);
}

#[test]
// docs/dsl.md, rules V1-V2; docs/reference-model.md, "Policies".
fn every_run_time_policy_matches_on_the_medium_config() {
    compare(MEDIUM);
}
