//! Holders and their refill: what autograd keeps, inside a checkpoint,
//! instead of a saved tensor, and the replay that fills them. The forward
//! packs every save into an empty holder; unpacking one in backward reruns
//! the checkpoint's closure (once per graph task, in the `Recompute`
//! phase), whose k-th save fills holder k.
//!
//! Invariants: holder k is the k-th save of the forward; `Inner::holders[k]`
//! points (weakly) at its slot, so a holder autograd released is not
//! filled. One replay per checkpoint and graph task (`replayed`), at most
//! one at a time (`replay_lock`); everything a replay pushes (hooks, frame,
//! grad mode, state-hook state) is popped by guards, also when the closure
//! panics.
//!
//! docs/semantics.md rules kept here: C3 (holders), C6 (the first unpack
//! recomputes, and what recomputation does), C7 (the whole closure runs
//! when early stop is off), C8 (once per graph task, serialised; each
//! holder hands its value out once), C12 (errors come back as the
//! backward's `Err`), C13 (the count and determinism checks), C16 (a
//! backward inside the closure), C17 (the stop once everything needed is
//! rebuilt, `early_stop` says how), S1 (a running Save body's saves go to
//! the body, not to holders), A1-A2 (grad mode, autocast), H3 (state hooks
//! around recomputation), D4 (a recomputed checkpoint leaves the
//! whole-model report).

use crate::autocast::Entered;
use crate::bridge::{
    grad_fn_saved, graph_task_id, AutocastState, GradModeGuard, HookPair, Payload, SaveSite,
};
use crate::checkpointing::checkpoint_state::{CheckpointState, HolderSlot};
use crate::checkpointing::early_stop::{StopState, STOP};
use crate::checkpointing::frame::{self, Phase};
use crate::checkpointing::save_region::pack::is_rebuilt;
use crate::checkpointing::saved_tensors::SavedTensorsHooks;
use crate::error::{catch_quietly, panic_message, Error, Result};
use crate::hooks::state_hooks::{restore_all, snapshot_all, RestoreOnDrop};
use crate::recorders::timing::{self, ReplayTimer};
use crate::recorders::trace;
use crate::sync::lock;
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
        if let Some(call) = &state.profile {
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
        if let Some(call) = &state.profile {
            // Where an early-stopped replay may end, for the planner.
            timing::note_holder(call);
        }
        let mut inner = lock(&state.inner);
        // docs/semantics.md, rule C3: everything else becomes an empty holder, in
        // save order.
        let index = inner.holders.len();
        // docs/semantics.md, rule C16: kept while the forward runs, for a
        // backward inside the closure (a detached alias, as packed: no cycle
        // through the node that saves it; autograd puts the save's `grad_fn`
        // back when it unpacks).
        let slot = Arc::new(if state.backward_inside {
            HolderSlot::keeping(tensor.shallow_clone())
        } else {
            HolderSlot::default()
        });
        inner.holders.push(Arc::downgrade(&slot));
        state.determinism.record(&mut inner.forward_saves, &tensor);
        Ok(Box::new(Holder {
            state: state.clone(),
            index,
            slot,
        }))
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String> {
        if let Some(saved) = payload.downcast_ref::<Delegated>() {
            let state = &saved.state;
            if !state
                .forward_running
                .load(std::sync::atomic::Ordering::SeqCst)
            {
                let task = current_task();
                // docs/semantics.md, rule T9: the user's hooks hear that the
                // checkpoint recomputes before any of its saves is unpacked,
                // a kept one, which needs no recomputation, included.
                state
                    .told
                    .tell(state.name.as_deref(), task)
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
        if holder
            .state
            .forward_running
            .load(std::sync::atomic::Ordering::SeqCst)
        {
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

/// Replays `state`'s closure once for backward `task`, filling its holders.
pub(crate) fn replay_if_needed(state: &Arc<CheckpointState>, task: i64) -> Result<()> {
    // docs/semantics.md, rule C8: one recomputation at a time, once per task.
    let _serial = lock(&state.replay_lock);
    if lock(&state.inner).replayed.contains(&task) {
        return Ok(());
    }
    // docs/semantics.md, rule T9: before the inputs are read back (a pair
    // may hold them) and before the closure runs, the user's hooks hear
    // that this checkpoint recomputes.
    state
        .told
        .tell(state.name.as_deref(), task)
        .map_err(|m| state.error(m))?;
    // The planner's calibration costs a choice by this time (planner/profile.rs).
    let _timed = state.profile.as_deref().map(ReplayTimer::start);
    // docs/semantics.md, rule C1: the inputs come back from the node that saved them.
    let inputs = saved_inputs(state)?;
    let caller_autocast = AutocastState::current()?;
    // docs/semantics.md, rule D4: no longer a forward's saved state.
    state.unregister();
    {
        let mut inner = lock(&state.inner);
        inner.replay_count = 0;
        inner.replay_error = None;
        // docs/semantics.md, rule C17: what this replay must rebuild before it
        // may stop.
        let holders = inner
            .holders
            .iter()
            .rposition(|h| h.strong_count() > 0)
            .map_or(0, |last| last + 1);
        inner.stop = StopState::start(state.early_stop, holders, inner.rebuild_regions);
        // docs/semantics.md, rule C7: a closure that left nothing to rebuild
        // (no live holder, no `Save` region to rebuild) is not run again,
        // with early stop off too, as torch never recomputes one that saved
        // nothing.
        let nothing_to_rebuild = holders == 0 && inner.rebuild_regions == 0;
        if nothing_to_rebuild || inner.stop.done(0) {
            // Nothing the backward reads needs the closure: it does not run.
            inner.replayed.insert(task);
            return Ok(());
        }
    }
    let outcome = {
        let _hooks = SavedTensorsHooks::push(Some(Arc::new(ReplayHooks {
            state: state.clone(),
            task,
        })));
        // docs/semantics.md, rules A1 and C6: grad mode on, whatever the caller's.
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
        // docs/semantics.md, rule D1: recomputation is never traced.
        let _untraced = trace::pause();
        // docs/semantics.md, rule H3: the caller's state is put back at the end,
        // also on error and panic (the guard's drop).
        let outer = RestoreOnDrop::new(
            &state.state_hooks,
            snapshot_all(&state.state_hooks).map_err(|m| state.error(m))?,
        );
        let entry = std::mem::take(&mut lock(&state.inner).entry_snapshots);
        // docs/semantics.md, rule H3: recomputation starts from the entry snapshot,
        // which stays for the next backward (C8).
        let restored = restore_all(&state.state_hooks, &entry);
        // Put the snapshots back: a retained graph replays again.
        lock(&state.inner).entry_snapshots = entry;
        restored.map_err(|m| state.error(m))?;
        // docs/semantics.md, rule C14: the default generators as the forward
        // found them, put back as they are now when recomputation ends.
        let generators = state
            .random
            .enter_recompute()
            .map_err(|e| state.error(format!("cannot restore the random generators: {e}")))?;
        // The forward holds the body while it runs: a backward through this
        // checkpoint's own saves from inside its closure would wait for itself.
        // docs/semantics.md, rule C16 (E19): an error, not a deadlock.
        let mut body = match state.body.try_lock() {
            Ok(body) => body,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(state.backward_inside_error()),
        };
        // docs/semantics.md, rules C7 and C12: the closure runs (to its end
        // unless it stops early, C17); a panic in it becomes this backward's
        // `Err` ("replay failed").
        // docs/semantics.md, rule R11: checked against the forward's path
        // from its head.
        lock(&state.path).begin();
        let outcome = catch_quietly(|| (body)(inputs));
        let resumed = generators.map_or(Ok(()), |g| {
            g.finish()
                .map_err(|e| format!("cannot put the random generators back: {e}"))
        });
        (outcome, outer.finish().and(resumed))
    };
    let explain =
        |message: String| state.error(message + &autocast_note(&state.autocast, &caller_autocast));
    // docs/semantics.md, rule C17: after the stop, whatever the tail did
    // (the stop's own unwind, or an error or panic of its own) is not an
    // error: everything backward reads is rebuilt. The guards above have
    // already put the thread's state back.
    let stopped = lock(&state.inner).stop.stopped;
    // docs/semantics.md, rule R11 (E36): a recomputation that left its
    // forward's path fails with where it did, whatever the closure made of
    // the failure it met there; one that ran to its end must have taken
    // every step of the forward.
    let ran_whole = !stopped && outcome.0.is_ok();
    if let Some(divergence) = lock(&state.path).finish(state.name.as_deref(), ran_whole) {
        return Err(state.error(divergence));
    }
    if let Err(payload) = outcome.0 {
        if !stopped {
            return Err(explain(format!(
                "replay failed: {}",
                panic_message(&*payload)
            )));
        }
    }
    outcome.1.map_err(|m| state.error(m))?;
    let mut inner = lock(&state.inner);
    // docs/semantics.md, rule C13 (E8): the number of saves is checked when
    // the closure ran to its end; a stopped replay saved exactly as many as
    // backward needs (C17).
    if !stopped && inner.replay_count != inner.holders.len() {
        return Err(explain(format!(
            "the forward saved {} tensors for backward but the replay saved {}; \
             forward and replay followed different code paths (the closure must do \
             the same work both times)",
            inner.holders.len(),
            inner.replay_count
        )));
    }
    // After the count: when the count differs, the paths differ and the
    // metadata of the saves after the first extra or missing one differs
    // only because they are shifted (E8 says more than E9 then).
    if let Some(message) = inner.replay_error.take() {
        return Err(explain(message));
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
    fn pack(&self, tensor: Tensor, _: SaveSite) -> Result<Payload, String> {
        let mut inner = lock(&self.state.inner);
        // docs/semantics.md, rule C17: once stopped (or with nothing left to
        // rebuild), every save fails, which ends the op saving it.
        if inner.stop.stopped || inner.stop.done(inner.replay_count) {
            inner.stop.stopped = true;
            return Err(STOP.into());
        }
        let index = inner.replay_count;
        inner.replay_count += 1;
        // docs/semantics.md, rule C16: a backward inside the closure reads
        // the replay's own graph, so its saves stay (detached aliases, as
        // packed); the graph goes when the replay ends.
        let keep = self.state.backward_inside.then(|| tensor.shallow_clone());
        if index < inner.holders.len() {
            // docs/semantics.md, rule C13: the k-th save is checked against the
            // forward's k-th (Metadata, Bitwise), and fills holder k (C6).
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
        // docs/semantics.md, rule C17: the last save backward needs stops the
        // replay at once: the op saving it does not even compute.
        if inner.stop.done(inner.replay_count) {
            inner.stop.stopped = true;
            return Err(STOP.into());
        }
        Ok(Box::new(keep))
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String> {
        match payload.downcast_ref::<Option<Tensor>>() {
            Some(Some(kept)) => Ok(kept.shallow_clone()),
            _ => Err(self.state.backward_inside_error().to_string()),
        }
    }
}
