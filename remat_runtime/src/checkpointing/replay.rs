//! The replay: the first unpack of a holder (or of a rebuilt save) in a
//! backward runs the checkpoint's closure again, in the `Recompute` phase,
//! whose k-th save fills holder k (`holders`). In three steps: `begin`
//! (once per graph task, the user's hooks told first), `run_closure` (under the forward's ambient state) and `conclude` (the
//! path, count and determinism checks).
//!
//! Invariant: at most one replay of a checkpoint at a time, once per graph
//! task; everything a replay pushes (hooks, frame, grad mode, autocast,
//! state-hook state, generators) is popped by guards, also when the closure
//! panics or stops early.
//!
//! docs/semantics.md rules kept here: C6 (what recomputation does), C7 (the
//! whole closure runs when early stop is off), C8 (once per graph task,
//! serialised), C12 (errors come back as the backward's `Err`), C13 (the
//! checks, through `holders`), C14 (the generators), C16 (E19 rather than a
//! deadlock), C17 (after the stop, the tail's failure is not an error), R11
//! (the path check), A1-A2 (grad mode, autocast), H3 (state hooks around
//! recomputation), T9 (the user's hooks told first), D1 (never traced), D4
//! (a recomputed checkpoint leaves the whole-model report).

use crate::autocast::Entered;
use crate::bridge::{self, AutocastState, GradModeGuard, HookPair, Payload, SaveSite};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::early_stop::{self, STOP};
use crate::checkpointing::frame::{self, Phase};
use crate::checkpointing::holders::Filled;
use crate::checkpointing::saved_tensors::SavedTensorsHooks;
use crate::error::{catch_quietly, panic_message, Result};
use crate::hooks::state_hooks::{restore_all, snapshot_all, RestoreOnDrop};
use crate::recorders::timing::ReplayTimer;
use crate::recorders::trace;
use crate::sync::lock;
use std::any::Any;
use std::sync::Arc;
use tch::Tensor;

/// How the closure's run ended: its own outcome (a panic's payload, the
/// stop's included), and whether the thread's state came back.
type Ran = (
    std::result::Result<(Vec<Option<Tensor>>, Vec<usize>), Box<dyn Any + Send>>,
    std::result::Result<(), String>,
);

/// Replays `state`'s closure once for backward `task`, filling its holders.
pub(crate) fn replay_if_needed(state: &Arc<CheckpointState>, task: i64) -> Result<()> {
    // docs/semantics.md, rule C8: one recomputation at a time, once per task.
    let _serial = state.serialise_replays();
    if !begin(state, task)? {
        return Ok(());
    }
    // The planner's calibration costs a choice by this time (planner/profile.rs).
    let _timed = state.settings().profile.as_deref().map(ReplayTimer::start);
    // docs/semantics.md, rule C1: the inputs come back from the node that saved them.
    let inputs = state.inputs().read_back().map_err(|m| state.error(m))?;
    let caller_autocast = AutocastState::current()?;
    // docs/semantics.md, rule D4: no longer a forward's saved state.
    state.unregister();
    if !state.holders().begin(task, state.settings().early_stop) {
        // Nothing the backward reads needs the closure: it does not run.
        return Ok(());
    }
    let ran = run_closure(state, task, inputs, caller_autocast)?;
    conclude(state, task, ran, &caller_autocast)
}

/// Whether `task` still needs its replay; if so, the user's hooks have
/// heard that it starts.
fn begin(state: &CheckpointState, task: i64) -> Result<bool> {
    if state.holders().replayed(task) {
        return Ok(false);
    }
    // docs/semantics.md, rule T9: before the inputs are read back (a pair
    // may hold them) and before the closure runs, the user's hooks hear
    // that this checkpoint recomputes.
    state
        .told()
        .tell(state.name(), task)
        .map_err(|m| state.error(m))?;
    Ok(true)
}

/// Runs the closure under the forward's ambient state, every save going to
/// the replay's hook; the guards put the caller's state back on every exit.
fn run_closure(
    state: &Arc<CheckpointState>,
    task: i64,
    inputs: Vec<Option<Tensor>>,
    caller_autocast: AutocastState,
) -> Result<Ran> {
    let settings = state.settings();
    let _hooks = SavedTensorsHooks::push(Some(Arc::new(ReplayHooks {
        state: state.clone(),
        task,
    })));
    // docs/semantics.md, rules A1 and C6: grad mode on, whatever the caller's.
    let _grad = GradModeGuard::new(true);
    // Rule A2: the forward's autocast state, entered as torch.autocast
    // enters one (left on every exit path by the guard's drop); nothing to
    // do in the common case of the same state.
    let _autocast = if settings.autocast != caller_autocast {
        Some(
            Entered::enter(caller_autocast, settings.autocast)
                .map_err(|e| state.error(e.to_string()))?,
        )
    } else {
        None
    };
    let _frame = frame::push(state.clone(), Phase::Recompute, None);
    // docs/semantics.md, rule D1: recomputation is never traced.
    let _untraced = trace::pause();
    // docs/semantics.md, rule H3: the caller's state is put back at the end,
    // also on error and panic (the guard's drop); recomputation starts from
    // the entry snapshot, which stays for the next backward (C8).
    let outer = RestoreOnDrop::new(
        &settings.state_hooks,
        snapshot_all(&settings.state_hooks).map_err(|m| state.error(m))?,
    );
    restore_all(&settings.state_hooks, &state.entry_snapshots()).map_err(|m| state.error(m))?;
    // docs/semantics.md, rule C14: the default generators as the forward
    // found them, put back as they are now when recomputation ends.
    let generators = state
        .random()
        .enter_recompute()
        .map_err(|e| state.error(format!("cannot restore the random generators: {e}")))?;
    let mut body = state.body_for_replay()?;
    // docs/semantics.md, rules C7 and C12: the closure runs (to its end
    // unless it stops early, C17); a panic in it becomes this backward's
    // `Err` ("replay failed"). Rule R11: checked against the forward's path
    // from its head.
    lock(state.path()).begin();
    // docs/semantics.md, rule C17: armed for the closure only, so that what
    // the guards above put back afterwards runs for real.
    let from_start = state.holders().arm_at() == 0;
    let armed = early_stop::arm(settings.early_stop, state.display_name(), from_start);
    let outcome = catch_quietly(|| (body)(inputs));
    drop(armed);
    let resumed = generators.map_or(Ok(()), |g| {
        g.finish()
            .map_err(|e| format!("cannot put the random generators back: {e}"))
    });
    Ok((outcome, outer.finish().and(resumed)))
}

/// Judges a replay that ran: the path, then the closure's own failure,
/// then the count and the determinism checks; the task is then replayed.
fn conclude(
    state: &CheckpointState,
    task: i64,
    (outcome, restored): Ran,
    caller_autocast: &AutocastState,
) -> Result<()> {
    let explain = |message: String| {
        state.error(message + &autocast_note(&state.settings().autocast, caller_autocast))
    };
    // docs/semantics.md, rule C17: after the stop, whatever the tail did
    // (the stop's own unwind, or an error or panic of its own) is not an
    // error: everything backward reads is rebuilt. The guards have already
    // put the thread's state back.
    let stopped = state.holders().stopped();
    // docs/semantics.md, rule R11 (E36): a recomputation that left its
    // forward's path fails with where it did, whatever the closure made of
    // the failure it met there; one that ran to its end must have taken
    // every step of the forward.
    let ran_whole = !stopped && outcome.is_ok();
    if let Some(divergence) = lock(state.path()).finish(state.name(), ran_whole) {
        return Err(state.error(divergence));
    }
    if let Err(payload) = outcome {
        if !stopped {
            return Err(explain(format!(
                "replay failed: {}",
                panic_message(&*payload)
            )));
        }
    }
    restored.map_err(|m| state.error(m))?;
    // docs/semantics.md, rule C13 (E8, E9).
    state.holders().finish(task).map_err(explain)
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

/// The hook during replay: fills holder k with the k-th save.
struct ReplayHooks {
    state: Arc<CheckpointState>,
    task: i64,
}

impl HookPair for ReplayHooks {
    fn pack(&self, tensor: Tensor, _: SaveSite) -> std::result::Result<Payload, String> {
        let settings = self.state.settings();
        // docs/semantics.md, rule C16: a backward inside the closure reads
        // the replay's own graph, so its saves stay (detached aliases, as
        // packed); the graph goes when the replay ends.
        let keep = settings.backward_inside.then(|| tensor.shallow_clone());
        // docs/semantics.md, rules C6, C13 and C17: the k-th save is checked
        // and fills holder k; the one that completes the rebuild fails, which
        // ends the op saving it (the bridge catches that and runs it dry);
        // saves of the tail's ops that still run are dropped.
        match self
            .state
            .holders()
            .fill_next(self.task, tensor, settings.determinism)
        {
            Filled::Stop { end_op } if self.state.stop_recomputation(end_op) => Err(STOP.into()),
            Filled::Counted { arm: true } => {
                // The ops that may make the stopping save are next.
                bridge::stop_activate();
                Ok(Box::new(keep))
            }
            Filled::Stop { .. } | Filled::Counted { .. } | Filled::Dropped => Ok(Box::new(keep)),
        }
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> std::result::Result<Tensor, String> {
        match payload.downcast_ref::<Option<Tensor>>() {
            Some(Some(kept)) => Ok(kept.shallow_clone()),
            _ => Err(self.state.backward_inside_error().to_string()),
        }
    }
}
