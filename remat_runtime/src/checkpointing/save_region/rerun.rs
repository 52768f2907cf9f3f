//! A `Save` region reached on recomputation of a checkpoint whose closure
//! computes gradients itself: its body runs again, so that the closure's
//! backward on the recomputation's graph reaches through it to the region's
//! inputs (a served value has no graph to the recomputed inputs).
//!
//! Invariant: the rerun body's saves go to a pair of its own, kept for that
//! graph and never counted as the checkpoint's saves, since on the forward
//! they went to the region's record, not to holders.
//!
//! docs/semantics.md rules kept here: C16 (the rerun), R4 (regions in the
//! body are plain calls, as on the forward), R5 (a region the forward did
//! not record).

use crate::bridge::{HookPair, Payload, SaveSite};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::frame;
use crate::checkpointing::saved_tensors::SavedTensorsHooks;
use crate::error::Result;
use crate::io::{RegionInput, RegionOutput};
use std::any::Any;
use std::sync::Arc;
use tch::Tensor;

/// Keeps every save of the rerun body for the recomputation's graph.
struct KeepForReplay;

impl HookPair for KeepForReplay {
    fn pack(&self, tensor: Tensor, _: SaveSite) -> std::result::Result<Payload, String> {
        Ok(Box::new(tensor))
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> std::result::Result<Tensor, String> {
        payload
            .downcast_ref::<Tensor>()
            .map(Tensor::shallow_clone)
            .ok_or_else(|| "remat internal error: foreign payload in a rerun Save body".into())
    }
}

/// Runs the body of the `Save` region `name` again during recomputation.
pub(crate) fn rerun<I: RegionInput, O: RegionOutput>(
    state: &Arc<CheckpointState>,
    name: &str,
    inputs: I,
    body: impl FnOnce(I) -> O,
) -> Result<O> {
    // docs/semantics.md, rule R5 (E6), as when the region is skipped.
    state
        .records()
        .reached(name, || state.region_display(name))?;
    let keep: Arc<dyn HookPair> = Arc::new(KeepForReplay);
    let _hooks = SavedTensorsHooks::push(Some(keep.clone()));
    // docs/semantics.md, rule R4: regions inside run plain, as on the forward.
    let _save = frame::enter_save_body(keep);
    Ok(body(inputs))
}
