use crate::common::assert_bitwise;
use crate::common::model::{batch, Model, ModelPolicy, POLICIES, SMALL};
use tch::Tensor;

/// Loss and every parameter's gradient under `policy`.
fn run(model: &Model, policy: ModelPolicy) -> (Tensor, Vec<(String, Tensor)>) {
    let (tokens, targets) = batch(SMALL, 7);
    model.zero_grad();
    let loss = model.loss(&tokens, &targets, policy);
    loss.backward();
    let grads = model
        .named_parameters()
        .into_iter()
        .map(|(n, p)| (n, p.grad().copy()))
        .collect();
    (loss.detach(), grads)
}

#[test]
fn every_policy_gives_bitwise_the_same_loss_and_gradients() {
    tch::set_num_threads(1);
    let model = Model::new(SMALL, 0);
    let (loss0, grads0) = run(&model, ModelPolicy::None);
    for policy in POLICIES {
        let (loss, grads) = run(&model, policy);
        assert_bitwise(&loss, &loss0, &format!("{policy:?} loss"));
        assert_eq!(grads.len(), grads0.len());
        for ((name, g), (_, g0)) in grads.iter().zip(&grads0) {
            assert!(g.defined(), "{policy:?}: no gradient for {name}");
            assert_bitwise(g, g0, &format!("{policy:?} {name}"));
        }
    }
}
