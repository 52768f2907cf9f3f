//! Replay: rerunning a checkpoint's closure inside backward, in the
//! `Recompute` phase, to refill its holders.
//!
//! Invariants: one replay per checkpoint and graph task (`replayed`), at most
//! one at a time (`replay_lock`); during it the k-th save fills holder k;
//! everything it pushes (hooks, frame, grad mode, state-hook state) is popped
//! by guards, also when the closure panics.

use crate::autocast::Entered;
use crate::bridge::{grad_fn_saved, AutocastState, GradModeGuard, HookPair, Payload};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::frame::{self, Phase};
use crate::error::{catch_quietly, panic_message, Error, Result};
use crate::hooks::saved_tensors::SavedTensorsHooks;
use crate::hooks::state_hooks::{restore_all, snapshot_all, RestoreOnDrop};
use crate::sync::lock;
use std::any::Any;
use std::sync::Arc;
use tch::Tensor;

/// Replays `state`'s closure once for backward `task`, filling its holders.
pub(crate) fn replay_if_needed(state: &Arc<CheckpointState>, task: i64) -> Result<()> {
    let _serial = lock(&state.replay_lock);
    if lock(&state.inner).replayed.contains(&task) {
        return Ok(());
    }
    let inputs = saved_inputs(state)?;
    let caller_autocast = AutocastState::current()?;
    state.unregister();
    {
        let mut inner = lock(&state.inner);
        inner.replay_count = 0;
        inner.replay_error = None;
    }
    let outcome = {
        let _hooks = SavedTensorsHooks::push(Some(Arc::new(ReplayHooks {
            state: state.clone(),
            task,
        })));
        let _grad = GradModeGuard::new(true);
        // Rule A2: the forward's autocast state, entered as torch.autocast
        // enters one (left on every exit path by the guard's drop); nothing
        // to do in the common case of the same state.
        let _autocast = if state.autocast != caller_autocast {
            Some(
                Entered::enter(caller_autocast, state.autocast)
                    .map_err(|e| state.error(e.to_string()))?,
            )
        } else {
            None
        };
        let _frame = frame::push(state.clone(), Phase::Recompute, None);
        let outer = RestoreOnDrop::new(
            &state.state_hooks,
            snapshot_all(&state.state_hooks).map_err(|m| state.error(m))?,
        );
        let entry = std::mem::take(&mut lock(&state.inner).entry_snapshots);
        let restored = restore_all(&state.state_hooks, &entry);
        // Put the snapshots back: a retained graph replays again.
        lock(&state.inner).entry_snapshots = entry;
        restored.map_err(|m| state.error(m))?;
        // The forward holds the body while it runs: a backward through this
        // checkpoint's own saves from inside its closure would wait for itself.
        let mut body = match state.body.try_lock() {
            Ok(body) => body,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(state.error(
                    "backward reached this checkpoint's saved tensors while its closure was \
                     still running (a backward inside the closure); compute that gradient \
                     outside the checkpoint",
                ))
            }
        };
        let outcome = catch_quietly(|| (body)(inputs));
        (outcome, outer.finish())
    };
    let explain =
        |message: String| state.error(message + &autocast_note(&state.autocast, &caller_autocast));
    if let Err(payload) = outcome.0 {
        return Err(explain(format!(
            "replay failed: {}",
            panic_message(&*payload)
        )));
    }
    outcome.1.map_err(|m| state.error(m))?;
    let mut inner = lock(&state.inner);
    if let Some(message) = inner.replay_error.take() {
        return Err(explain(message));
    }
    if inner.replay_count != inner.holders.len() {
        return Err(explain(format!(
            "the forward saved {} tensors for backward but the replay saved {}; \
             forward and replay followed different code paths (the closure must do \
             the same work both times)",
            inner.holders.len(),
            inner.replay_count
        )));
    }
    inner.replayed.insert(task);
    Ok(())
}

/// What a message about dtypes adds when the forward's autocast state
/// differs from the one backward was called under: recomputation ran under
/// the forward's (rule A2), so the difference is a lead, not the cause.
fn autocast_note(forward: &AutocastState, caller: &AutocastState) -> String {
    if forward == caller {
        return String::new();
    }
    format!(
        " (the forward ran with {}, the backward that recomputes it was called with {}; \
         recomputation ran under the forward's state, so a dtype that differs from the \
         forward's comes from the closure itself, e.g. a tensor made outside autocast or \
         a cast that depends on `is_recomputing()`)",
        forward.describe(),
        caller.describe()
    )
}

/// The checkpoint's inputs, read back from the node that saved them.
fn saved_inputs(state: &CheckpointState) -> Result<Vec<Option<Tensor>>> {
    let saver = lock(&state.input_saver);
    let saver = saver
        .as_ref()
        .ok_or_else(|| Error::Internal("replay of a checkpoint without saved inputs".into()))?;
    let mut next = 0;
    state
        .present
        .iter()
        .map(|&present| {
            if !present {
                return Ok(None);
            }
            let t = grad_fn_saved(saver, next).map_err(|e| {
                state.error(format!("cannot read checkpoint input {next} back: {e}"))
            })?;
            next += 1;
            Ok(Some(t))
        })
        .collect()
}

/// The hook during replay: fills holder k with the k-th save.
struct ReplayHooks {
    state: Arc<CheckpointState>,
    task: i64,
}

impl HookPair for ReplayHooks {
    fn pack(&self, tensor: Tensor) -> Result<Payload, String> {
        let mut inner = lock(&self.state.inner);
        let index = inner.replay_count;
        inner.replay_count += 1;
        if index < inner.holders.len() {
            if let Err(message) = self
                .state
                .determinism
                .check(&inner.forward_saves, index, &tensor)
            {
                inner.replay_error.get_or_insert(message);
            }
            if let Some(slot) = inner.holders[index].upgrade() {
                slot.fill(self.task, tensor);
            }
        }
        Ok(Box::new(()))
    }

    fn unpack(&self, _: &(dyn Any + Send)) -> Result<Tensor, String> {
        Err("remat internal error: the replay's own graph was backpropagated".into())
    }
}
