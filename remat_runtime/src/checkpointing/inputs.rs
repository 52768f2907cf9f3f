//! A checkpoint's inputs, saved for its replays: the forward saves them as
//! autograd saved tensors on a node whose output nothing uses (rule C1), so
//! that their lifetime follows the graph and the user's saved-tensor hooks
//! see them (kind `CheckpointInput`, T3); a replay reads them back from that
//! node.
//!
//! Invariant: the saving node's backward never runs (nothing uses its
//! output); the reports' rows hold the inputs weakly, the node holds them.
//!
//! docs/semantics.md rules kept here: C1 (inputs saved on a node, read back
//! by a replay), T3 (through the user's pair, kind `CheckpointInput`), D3
//! (inputs in the reports: parameters apart).

use crate::bridge::{
    attach_node, grad_fn_saved, is_parameter, no_grad, storage_nbytes, NodeBackward, SavedAccess,
    WeakStorage,
};
use crate::checkpointing::tensor_hooks::{SavedTensorKind, TensorHooks};
use crate::error::Result;
use crate::sync::lock;
use std::cell::Cell;
use std::sync::Mutex;
use tch::Tensor;

/// The inputs of one checkpoint call, as its forward saved them.
pub(crate) struct SavedInputs {
    /// Output of the node that saved the inputs.
    saver: Mutex<Tensor>,
    /// Which flat inputs were present (absent ones are not saved).
    present: Vec<bool>,
    /// Each saved input, for reports.
    kept: Vec<KeptInput>,
}

/// A checkpoint input as the forward saved it for replay, for reports
/// (weakly: the saver node holds the input while the graph lives).
pub(crate) struct KeptInput {
    pub storage: WeakStorage,
    pub nbytes: i64,
    /// A parameter (or a view of one): not activation memory.
    pub param: bool,
    /// Packed by the user's saved-tensor hooks rather than kept as is.
    pub offloaded: bool,
}

impl SavedInputs {
    /// Saves the present ones of `flat` on a node, through `hooks` (kind
    /// `CheckpointInput`) when the user has a pair (rules C1 and T3).
    pub(crate) fn save(flat: &[Option<Tensor>], hooks: Option<&TensorHooks>) -> Result<Self> {
        let present = flat.iter().map(Option::is_some).collect();
        let saved: Vec<&Tensor> = flat.iter().flatten().collect();
        let saver = {
            let _saving = saving_inputs();
            let _inputs = hooks.map(|h| h.push_as(SavedTensorKind::CheckpointInput));
            save_on_node(&saved)?
        };
        let kept = saved
            .iter()
            .filter_map(|t| {
                Some(KeptInput {
                    storage: WeakStorage::new(t)?,
                    nbytes: storage_nbytes(t),
                    param: is_parameter(t),
                    offloaded: hooks.is_some(),
                })
            })
            .collect();
        Ok(SavedInputs {
            saver: Mutex::new(saver),
            present,
            kept,
        })
    }

    /// The inputs, read back from the node that saved them (rule C1); the
    /// error names the input that could not be.
    pub(crate) fn read_back(&self) -> std::result::Result<Vec<Option<Tensor>>, String> {
        let saver = lock(&self.saver);
        let mut next = 0;
        self.present
            .iter()
            .map(|&present| {
                if !present {
                    return Ok(None);
                }
                let t = grad_fn_saved(&saver, next)
                    .map_err(|e| format!("cannot read checkpoint input {next} back: {e}"))?;
                next += 1;
                Ok(Some(t))
            })
            .collect()
    }

    /// Each saved input, for reports.
    pub(crate) fn kept(&self) -> &[KeptInput] {
        &self.kept
    }
}

/// The node's backward: never run, since nothing uses its output.
struct SaveInputs;

impl NodeBackward for SaveInputs {
    fn backward(
        &mut self,
        _: &SavedAccess<'_>,
        _: Vec<Tensor>,
    ) -> std::result::Result<Vec<Option<Tensor>>, String> {
        Err("remat internal error: the checkpoint input saver was backpropagated".into())
    }
}

thread_local! {
    static SAVING_INPUTS: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as saving a checkpoint's inputs until dropped, so that
/// whoever packs them (the whole-model report's tracker) can tell them from
/// activations.
struct SavingInputs(bool);

fn saving_inputs() -> SavingInputs {
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
/// [`grad_fn_saved`] on the returned tensor.
fn save_on_node(inputs: &[&Tensor]) -> Result<Tensor> {
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
