//! The macro model gives bitwise the loss and gradients of the runtime-API
//! model under the same policy, and of the model without checkpoints.

use crate::common::assert_bitwise;
use remat_reference::macros::{loss, MacroPolicy};
use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
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

fn compare(policy: MacroPolicy, reference_policy: ModelPolicy) {
    tch::set_num_threads(1);
    let base = Model::new(SMALL, 7);
    let (tokens, targets) = batch(SMALL, 11);
    let macros = run(&base.deep_copy(), |m| loss(m, &tokens, &targets, policy));
    for other in [ModelPolicy::None, reference_policy] {
        let reference = run(&base.deep_copy(), |m| m.loss(&tokens, &targets, other));
        assert_bitwise(&macros.0, &reference.0, &format!("loss vs {other:?}"));
        assert_eq!(macros.1.len(), reference.1.len());
        for ((name, a), (_, b)) in macros.1.iter().zip(&reference.1) {
            assert!(a.defined(), "{name}: no gradient");
            assert_bitwise(a, b, &format!("{name} vs {other:?}"));
        }
    }
}

#[test]
fn selective_matches_the_runtime_api_and_no_checkpoint() {
    compare(MacroPolicy::Selective, ModelPolicy::Selective);
}

#[test]
fn save_mlp_matches_the_runtime_api_and_no_checkpoint() {
    compare(MacroPolicy::SaveMlp, ModelPolicy::SaveMlp);
}
