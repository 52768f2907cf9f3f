//! The autograd node the runtime adds to graphs, the input saver
//! (docs/semantics.md, rule C1), and the identity a served value requiring
//! grad goes through (rule P2). A checkpoint's outputs get no node of their
//! own (rule C9).

use crate::bridge::{attach_node, no_grad, served_value, NodeBackward, SavedAccess};
use crate::error::Result;
use tch::Tensor;

/// Saves the checkpoint's inputs as autograd saved tensors (so their
/// lifetime follows the graph and saved-tensor hooks see them), on a node
/// whose output nothing uses: its backward never runs.
struct SaveInputs;

impl NodeBackward for SaveInputs {
    fn backward(
        &mut self,
        _: &SavedAccess<'_>,
        _: Vec<Tensor>,
    ) -> Result<Vec<Option<Tensor>>, String> {
        Err("remat internal error: the checkpoint input saver was backpropagated".into())
    }
}

thread_local! {
    static SAVING_INPUTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as saving a checkpoint's inputs until dropped, so that
/// whoever packs them (the whole-model report's tracker) can tell them from
/// activations.
pub(crate) struct SavingInputs(bool);

pub(crate) fn saving_inputs() -> SavingInputs {
    SavingInputs(SAVING_INPUTS.with(|s| s.replace(true)))
}

impl Drop for SavingInputs {
    fn drop(&mut self) {
        SAVING_INPUTS.with(|s| s.set(self.0));
    }
}

/// Whether the save being packed now is a checkpoint input.
pub(crate) fn is_saving_inputs() -> bool {
    SAVING_INPUTS.with(|s| s.get())
}

/// A node holding `inputs` as saved tensors; read them back with
/// [`crate::bridge::grad_fn_saved`] on the returned tensor.
pub(crate) fn save_inputs(inputs: &[&Tensor]) -> Result<Tensor> {
    // A dummy leaf that requires grad guarantees the node is created even
    // when no input requires grad (parameters captured by the closure may).
    let dummy = Tensor::empty([0], tch::kind::FLOAT_CPU).set_requires_grad(true);
    let mut out = vec![no_grad(|| Tensor::empty([0], tch::kind::FLOAT_CPU))];
    attach_node(
        Box::new(SaveInputs),
        "CheckpointSaveInputs",
        &[&dummy],
        &mut out,
        inputs,
    )?;
    Ok(out.pop().expect("one output"))
}

/// A non-leaf tensor requiring grad with `value`'s data and metadata: the
/// autograd identity a served value's forward counterpart had, inside the
/// replay graph that is thrown away (its `grad_fn` fails if ever run).
pub(crate) fn non_leaf(value: &Tensor) -> Result<Tensor> {
    served_value(value)
}
