//! The two autograd nodes the runtime adds to graphs: the input saver
//! (docs/semantics.md, rule C1) and the boundary (rule C9); and the identity
//! a served value requiring grad goes through (rule P2).

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
    static MARKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
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

/// Whether the save being packed now is a boundary's marker: a checkpoint
/// keeps it as is (it has no data) instead of making it a holder, so that a
/// replay never has to run on to the boundary to refill it (rule C17).
pub(crate) fn is_marker() -> bool {
    MARKING.with(|m| m.get())
}

/// At the checkpoint's output: its backward is what backward reaches first in
/// the region, and it unpacks a zero-element saved tensor, which starts the
/// replay before any other saved tensor of the region is needed.
struct Boundary;

impl NodeBackward for Boundary {
    fn backward(
        &mut self,
        saved: &SavedAccess<'_>,
        grads: Vec<Tensor>,
    ) -> Result<Vec<Option<Tensor>>, String> {
        let _replayed = saved.get(0).map_err(|e| e.to_string())?;
        Ok(grads.into_iter().map(Some).collect())
    }
}

/// `t` passed through a [`Boundary`] node (unchanged when it needs no grad).
pub(crate) fn boundary(t: Tensor) -> Result<Tensor> {
    if !t.requires_grad() {
        return Ok(t);
    }
    let marker = Tensor::empty([0], (t.kind(), t.device()));
    let mut out = vec![no_grad(|| t.view_as(&t))];
    let was = MARKING.with(|m| m.replace(true));
    let attached = attach_node(
        Box::new(Boundary),
        "CheckpointBoundary",
        &[&t],
        &mut out,
        &[&marker],
    );
    MARKING.with(|m| m.set(was));
    attached?;
    Ok(out.pop().expect("one output"))
}

/// A non-leaf tensor requiring grad with `value`'s data and metadata: the
/// autograd identity a served value's forward counterpart had, inside the
/// replay graph that is thrown away (its `grad_fn` fails if ever run).
pub(crate) fn non_leaf(value: &Tensor) -> Result<Tensor> {
    served_value(value)
}
