//! Snapshots of the trace (`collect_trace`) of the macro model's forward:
//! the `scope` of `loss`, and each block's regions under its policy.

use remat::collect_trace;
use remat_reference::macros::{loss, MacroPolicy};
use remat_reference::model::{batch, Model, SMALL};

fn trace(policy: MacroPolicy) -> String {
    let model = Model::new(SMALL, 1);
    let (tokens, targets) = batch(SMALL, 2);
    let (loss, trace) = collect_trace(|| loss(&model, &tokens, &targets, policy));
    // Replay is not traced: a backward adds nothing.
    loss.f_backward().expect("backward");
    trace.to_string()
}

#[test]
fn trace_of_the_selective_model() {
    insta::assert_snapshot!(trace(MacroPolicy::Selective));
}

#[test]
fn trace_of_the_save_mlp_model() {
    insta::assert_snapshot!(trace(MacroPolicy::SaveMlp));
}
