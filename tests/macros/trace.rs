//! Snapshots of the trace (`collect_trace`) of the macro model's forward:
//! the `scope` of `loss`, and each block's regions under its policy.

use remat::diagnostics::collect_trace;
use remat_reference::model::{batch, Model, ModelPolicy, SMALL};

fn trace(policy: ModelPolicy) -> String {
    let model = Model::new(SMALL, 1);
    let (tokens, targets) = batch(SMALL, 2);
    let (loss, trace) = collect_trace(|| {
        let loss = model.loss(&tokens, &targets, policy);
        // Replay runs inside this backward, within the collection, and
        // adds nothing to the trace.
        loss.f_backward().expect("backward");
        loss
    });
    assert!(loss.defined());
    trace.to_string()
}

#[test]
// docs/dsl.md, rule G7; docs/semantics.md, rule D1.
fn trace_of_the_selective_model() {
    insta::assert_snapshot!(trace(ModelPolicy::Selective));
}

#[test]
// docs/dsl.md, rule G7; docs/semantics.md, rule D1.
fn trace_of_the_save_mlp_model() {
    insta::assert_snapshot!(trace(ModelPolicy::SaveMlp));
}

#[test]
// docs/dsl.md, rule G7; docs/semantics.md, rule D1.
fn trace_of_the_full_model() {
    // `full` runs both regions as `recompute`.
    insta::assert_snapshot!(trace(ModelPolicy::Full));
}

#[test]
// docs/dsl.md, rules G8 and V2; docs/semantics.md, rule D1.
fn trace_of_the_model_without_checkpoints() {
    // Regions outside a checkpoint are plain calls: only the scopes remain.
    insta::assert_snapshot!(trace(ModelPolicy::None));
}
