use crate::common::{assert_same_run, Run};
use remat_reference::model::{batch, Model, ModelPolicy, POLICIES, SMALL};
use tch::Tensor;

/// Loss and every parameter's gradient under `policy`.
fn run(model: &Model, policy: ModelPolicy) -> Run {
    let (tokens, targets) = batch(SMALL, 7);
    model.zero_grad();
    let loss = model.loss_api(&tokens, &targets, policy);
    loss.backward();
    Run::of(&loss, model.named_parameters())
}

#[test]
// docs/reference-model.md, "Policies": bitwise the same under every policy.
fn every_policy_gives_bitwise_the_same_loss_and_gradients() {
    tch::set_num_threads(1);
    let model = Model::new(SMALL, 0);
    let plain = run(&model, ModelPolicy::None);
    for policy in POLICIES {
        assert_same_run(&run(&model, policy), &plain, &format!("{policy:?}"));
    }
}

#[test]
// docs/semantics.md, rules R3 and C8.
fn in_selective_attention_runs_once_and_the_mlp_replays_once_per_backward() {
    use remat::{autograd::backward_with, checkpoint, recompute_needs_tensor, region, Policy};
    use remat_reference::model::{attention, ln, mlp};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let model = Model::new(SMALL, 5);
    let block = model.blocks[0].shallow();
    let (attn_runs, mlp_runs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a, m) = (attn_runs.clone(), mlp_runs.clone());
    let x =
        Tensor::randn([SMALL.b, SMALL.t, SMALL.d], tch::kind::FLOAT_CPU).set_requires_grad(true);
    let y = checkpoint("layers.0").call(&x, move |x| {
        let p = &block;
        let h = ln(&x, &p.ln1_w, &p.ln1_b, SMALL.d);
        let attn = region("attention", Policy::Save).call(&h, |h| {
            a.fetch_add(1, Ordering::SeqCst);
            attention(p, h)
        });
        recompute_needs_tensor(&attn);
        let x = &x + attn;
        let h = ln(&x, &p.ln2_w, &p.ln2_b, SMALL.d);
        let out = region("mlp", Policy::Recompute).call(&h, |h| {
            m.fetch_add(1, Ordering::SeqCst);
            mlp(p, h)
        });
        x + out
    });
    let loss = y.sum(tch::Kind::Float);
    let runs = || {
        (
            attn_runs.load(Ordering::SeqCst),
            mlp_runs.load(Ordering::SeqCst),
        )
    };
    assert_eq!(runs(), (1, 1));
    backward_with(&loss, true).unwrap();
    assert_eq!(runs(), (1, 2));
    backward_with(&loss, false).unwrap();
    assert_eq!(runs(), (1, 3));
}
