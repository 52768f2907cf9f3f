//! The checkpoint's saved-tensor hook on the forward: what autograd keeps,
//! inside a checkpoint, instead of a saved tensor. Every save becomes an
//! empty holder (`holders`), except in a running `Save` body, whose record
//! packs it; unpacking a holder in backward starts the replay (`replay`)
//! that fills it.
//!
//! Invariant: holder k is the k-th save of the forward; while the forward
//! runs, a holder hands out the forward's value (C16) or fails, never
//! recomputes.
//!
//! docs/semantics.md rules kept here: C3 (holders), C6 (the first unpack
//! recomputes), C8 (each holder hands its value out once per graph task),
//! C16 (a backward inside the closure), S1 (a running Save body's saves go
//! to the body, not to holders), S3 (a rebuilt save's unpack recomputes),
//! T9 (the user's hooks hear of recomputation before any unpack).

use crate::bridge::{graph_task_id, HookPair, Payload, SaveSite};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::frame;
use crate::checkpointing::holders::HolderSlot;
use crate::checkpointing::replay::replay_if_needed;
use crate::checkpointing::save_region::pack::is_rebuilt;
use crate::recorders::timing;
use std::any::Any;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use tch::Tensor;

/// One saved tensor of the forward, as autograd keeps it.
struct Holder {
    state: Arc<CheckpointState>,
    index: usize,
    slot: Arc<HolderSlot>,
}

/// The id of the running backward, or a fresh one outside backward (so that
/// every unpack there replays, as PyTorch does).
// docs/semantics.md, rule C8: outside any backward every unpack is a task
// of its own, so it recomputes.
pub(crate) fn current_task() -> i64 {
    static OUTSIDE: AtomicI64 = AtomicI64::new(-1);
    match graph_task_id() {
        Some(id) => id as i64,
        None => OUTSIDE.fetch_sub(1, Ordering::Relaxed),
    }
}

/// A save of a `Save` body, packed by that body's pair (which unpacks it).
/// A save rebuilt from a recomputed input (S3) also holds its checkpoint,
/// whose recomputation its unpack starts.
struct Delegated {
    pair: Arc<dyn HookPair>,
    payload: Payload,
    /// Its checkpoint, for the start of recomputation its unpack tells the
    /// user's hooks (T9).
    state: Arc<CheckpointState>,
    /// Rebuilt from a recomputed input (S3): its unpack recomputes.
    rebuilt: bool,
}

/// The checkpoint's hook on the forward: every save becomes an empty holder,
/// except in a running `Save` body, whose pair packs it instead.
pub(crate) struct ForwardHooks(pub Arc<CheckpointState>);

impl HookPair for ForwardHooks {
    /// The site goes on to a `Save` body's pair: it tells parameters apart
    /// (not billed as activations) and names the saving node.
    fn pack(&self, tensor: Tensor, site: SaveSite) -> Result<Payload, String> {
        let state = &self.0;
        let settings = state.settings();
        if let Some(call) = &settings.profile {
            timing::note_saved(call, &tensor);
        }
        // docs/semantics.md, rule S1: the saves of a running Save body stay resident.
        if let Some(pair) = frame::save_pack_of(state) {
            let payload = pair.pack(tensor, site)?;
            let rebuilt = is_rebuilt(&*payload);
            return Ok(Box::new(Delegated {
                pair,
                payload,
                state: state.clone(),
                rebuilt,
            }));
        }
        if let Some(call) = &settings.profile {
            // Where an early-stopped replay may end, for the planner.
            timing::note_holder(call);
        }
        // docs/semantics.md, rule C16: kept while the forward runs, for a
        // backward inside the closure (a detached alias, as packed: no cycle
        // through the node that saves it; autograd puts the save's `grad_fn`
        // back when it unpacks).
        let slot = Arc::new(if settings.backward_inside {
            HolderSlot::keeping(tensor.shallow_clone())
        } else {
            HolderSlot::default()
        });
        // docs/semantics.md, rule C3: everything else becomes an empty
        // holder, in save order.
        let index = state
            .holders()
            .add(&slot, &tensor, settings.determinism, site.node);
        Ok(Box::new(Holder {
            state: state.clone(),
            index,
            slot,
        }))
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String> {
        if let Some(saved) = payload.downcast_ref::<Delegated>() {
            let state = &saved.state;
            if !state.forward_running() {
                let task = current_task();
                // docs/semantics.md, rule T9: the user's hooks hear that the
                // checkpoint recomputes before any of its saves is unpacked,
                // a kept one, which needs no recomputation, included.
                state
                    .told()
                    .tell(state.name(), task)
                    .map_err(|m| state.error(m).to_string())?;
                // docs/semantics.md, rules C6 and S3: a rebuilt save is there
                // once recomputation reached its skipped region.
                if saved.rebuilt {
                    replay_if_needed(state, task).map_err(|e| e.to_string())?;
                }
            }
            return saved.pair.unpack(&*saved.payload);
        }
        let holder = payload
            .downcast_ref::<Holder>()
            .ok_or("remat internal error: foreign payload in a checkpoint holder")?;
        // docs/semantics.md, rule C16: a backward inside the closure, while
        // its forward runs, reads the forward's values; without them it
        // would have to rerun the closure that is running (E19).
        if holder.state.forward_running() {
            return holder
                .slot
                .forward_value()
                .ok_or_else(|| holder.state.backward_inside_error().to_string());
        }
        let task = current_task();
        // docs/semantics.md, rule C6: the first unpack of the task recomputes.
        replay_if_needed(&holder.state, task).map_err(|e| e.to_string())?;
        // docs/semantics.md, rule C8 (E21): each value once per graph task.
        holder.slot.take(task).ok_or_else(|| {
            format!(
                "checkpoint `{}`: saved tensor {} was not refilled by the replay, or was \
                 unpacked twice in one backward",
                holder.state.display_name(),
                holder.index
            )
        })
    }
}
