//! The forward of one checkpoint call, once its options are resolved
//! (`checkpoint` resolves them): a step of the enclosing checkpoint's path,
//! then either one plain run, or the inputs saved on a node, a new
//! [`CheckpointState`], and the closure run with every save packed into an
//! empty holder (`holder`). What the closure returns reaches the caller as
//! plain values, asked of the checkpoints around this one, not of itself.
//!
//! Invariant: whatever the forward pushes (hooks, frame) is popped by guards,
//! also when the closure panics; with grad mode off the closure simply runs.
//!
//! docs/semantics.md rules kept here: C1 (inputs saved on a node), C4 (plain
//! runs), C9 (no boundary), C10 (outputs), C11 (errors on the forward), C14
//! (the generators at entry), C16 (the forward's end), H2 (the entry
//! snapshot), T4 (which saved-tensor pair), T9 (the pair told of
//! recomputation), R3 (the plan's decision, once), R11 (a nested
//! checkpoint is a step of its caller's path), K5 and K8 (a checkpoint's
//! own return value is asked of the checkpoints around it only).

use crate::bridge::AutocastState;
use crate::checkpointing::auto::Resolved;
use crate::checkpointing::capacity;
use crate::checkpointing::checkpoint_state::{Body, CheckpointState, Settings};
use crate::checkpointing::closure::RecomputableClosure;
use crate::checkpointing::determinism::Determinism;
use crate::checkpointing::early_stop;
use crate::checkpointing::frame::{self, Phase};
use crate::checkpointing::holder::ForwardHooks;
use crate::checkpointing::inputs::SavedInputs;
use crate::checkpointing::path::{Asker, At, Run, Step};
use crate::checkpointing::random_state::RandomState;
use crate::checkpointing::region::asked;
use crate::checkpointing::saved_tensors::SavedTensorsHooks;
use crate::checkpointing::tensor_hooks::TensorHooks;
use crate::error::{Error, Result};
use crate::hooks::state_hooks::{snapshot_all, RecomputeStateHook};
use crate::io::{CheckpointInputs, RegionOutput};
use crate::recorders::timing;
use crate::saved::arg::token;
use crate::saved::returned::CheckpointOutput;
use crate::sync::lock;
use std::sync::Arc;
use tch::Tensor;

/// One checkpoint call, its options resolved (every default applied).
pub(crate) struct Call {
    pub name: Option<Arc<str>>,
    /// How it runs (checkpointed, or plainly and why).
    pub how: Run,
    /// Switched on or off by the active plan (profiled as such).
    pub auto: bool,
    /// The plan's decision for it and its `Auto` regions (rule R3).
    pub decision: Resolved,
    pub determinism: Determinism,
    pub state_hooks: Vec<Arc<dyn RecomputeStateHook>>,
    /// The user's saved-tensor pair for it (rule T4).
    pub user_hooks: Option<TensorHooks>,
    pub strict: bool,
    pub early_stop: bool,
    pub backward_inside: bool,
    /// Whether it keeps the default generators (rule C14).
    pub preserve_rng_state: bool,
}

/// Runs a checkpoint call's forward.
pub(crate) fn run<I, O, F>(call: Call, inputs: I, body: F, at: At) -> Result<O::Output>
where
    I: CheckpointInputs,
    O: CheckpointOutput,
    F: Fn(I::Owned) -> O,
    F: RecomputableClosure<I::Owned, O>,
{
    let mut flat = Vec::new();
    inputs.flatten(&mut flat);
    let mut lens = Vec::new();
    inputs.lens(&mut lens);
    let owned =
        move |flat: Vec<Option<Tensor>>| I::rebuild(&mut lens.iter(), &mut flat.into_iter());
    // docs/semantics.md, rule R11: a checkpoint called in another's closure
    // is a step of that closure's path.
    nested_step(call.name.as_deref(), call.how, at)?;
    // docs/semantics.md, rule C4: disabled, switched off by the plan, or grad
    // mode off: one plain run, no state.
    if call.how != Run::Checkpointed {
        timing::note_inputs(&flat);
        // docs/dsl.md, rule Y4: the body runs in its caller, whose
        // checkpoints are asked for a save output it returns (also where
        // the body unwraps its own return value, as `#[checkpoint]` does).
        let _plain = frame::enter_plain_body();
        let out = timing::plain_call(call.name.as_deref(), || body(owned(flat)));
        return Ok(returned_plain(out, at));
    }
    // docs/semantics.md, rule C9: the outputs are the tensors the closure
    // computed, in each other's graph as it built them.
    let erased: Body = Box::new(move |flat| {
        // docs/semantics.md, rules K5 and K8: the checkpoint's own save
        // outputs leave unasked; the checkpoints around it are asked.
        let mut layout = Vec::new();
        let parts = returned_inside(body(owned(flat)), at).into_parts(&mut layout);
        (parts, layout)
    });
    let (state, user_hooks) = start(call, &flat, erased)?;
    // docs/semantics.md, rule C17: called in the tail of a recomputation
    // that stopped (saving these very inputs may have stopped it), the
    // closure computes from placeholders of its inputs, so runs dry.
    let flat = early_stop::dry_inputs(flat)?;
    let (parts, layout) = forward(&state, user_hooks, flat)?;
    // The next call of this checkpoint starts its tables at these sizes.
    capacity::reached(
        state.name(),
        capacity::Sizes {
            records: state.records().len(),
            indexed: lock(state.output_index()).len(),
            steps: lock(state.path()).len(),
        },
    );
    // docs/semantics.md, rule C10: the caller's value, rebuilt as built
    // (absent items included).
    O::Output::from_parts(parts, &layout)
}

/// The state of a checkpointed call: its inputs saved, its generators read.
fn start(
    call: Call,
    flat: &[Option<Tensor>],
    body: Body,
) -> Result<(Arc<CheckpointState>, Option<TensorHooks>)> {
    let display = || call.name.as_deref().unwrap_or("<unnamed>").to_string();
    // docs/semantics.md, rule R3 (E25): a plan made for other input shapes
    // does not hold for this call (a plain run keeps nothing, so it is not
    // asked).
    call.decision
        .check_inputs(flat)
        .map_err(|message| Error::Checkpoint {
            checkpoint: display(),
            message,
        })?;
    let profile = timing::start_call(call.name.as_deref(), call.auto, flat);
    // docs/semantics.md, rules C1 and T3: the inputs are saved on a node,
    // through the user's pair (kind CheckpointInput) when there is one.
    let inputs = SavedInputs::save(flat, call.user_hooks.as_ref())?;
    // docs/semantics.md, rule C14: the generators at entry, unless the
    // checkpoint or the process opted out.
    let random = if call.preserve_rng_state {
        RandomState::at_entry().map_err(|e| Error::Checkpoint {
            checkpoint: display(),
            message: format!(
                "cannot read the random generators: {e} (`preserve_rng_state(false)` \
                 does without them)"
            ),
        })?
    } else {
        RandomState::off()
    };
    let settings = Settings {
        name: call.name,
        determinism: call.determinism,
        state_hooks: call.state_hooks,
        strict: call.strict,
        early_stop: call.early_stop,
        backward_inside: call.backward_inside,
        auto: call.decision,
        profile,
        // Rule A2: recomputation runs under the forward's autocast.
        autocast: AutocastState::current()?,
    };
    let user_hooks = call.user_hooks;
    let state = CheckpointState::new(settings, body, inputs, random);
    // docs/semantics.md, rule T9: the pair in effect is told when the
    // checkpoint recomputes.
    if let Some(hooks) = &user_hooks {
        state.told().register(hooks);
    }
    Ok((state, user_hooks))
}

/// Runs the closure for the first time, every save an empty holder; its
/// frame hands the user's pair on to the closure's regions (rule T4).
fn forward(
    state: &Arc<CheckpointState>,
    user_hooks: Option<TensorHooks>,
    flat: Vec<Option<Tensor>>,
) -> Result<(Vec<Option<Tensor>>, Vec<usize>)> {
    let _hooks = SavedTensorsHooks::push(Some(Arc::new(ForwardHooks(state.clone()))));
    let _frame = frame::push(state.clone(), Phase::Forward, user_hooks);
    // docs/semantics.md, rule C16: from the closure's return (or unwind)
    // on, backward reaches this checkpoint by recomputing it.
    let _ended = ForwardEnds(state);
    // docs/semantics.md, rule H2: the entry snapshot.
    let settings = state.settings();
    state.set_entry_snapshots(snapshot_all(&settings.state_hooks).map_err(|m| state.error(m))?);
    // docs/semantics.md, rule C11: a panic unwinds through the guards:
    // nothing stays installed.
    let mut body = state.body();
    Ok(match &settings.profile {
        None => (body)(flat),
        Some(call) => timing::time_forward(call, settings.early_stop, || (body)(flat)),
    })
}

/// Ends the forward of a checkpoint when dropped: after its closure
/// returned or unwound.
struct ForwardEnds<'a>(&'a CheckpointState);

impl Drop for ForwardEnds<'_> {
    fn drop(&mut self) {
        self.0.end_forward();
    }
}

/// Notes a checkpoint called inside another checkpoint's closure (not in a
/// running `Save` body, which recomputation skips) on the outer one's path,
/// or, during its recomputation, checks it against the forward's.
fn nested_step(name: Option<&str>, how: Run, at: At) -> Result<()> {
    let Some((outer, phase)) = frame::with_top(|f| {
        f.filter(|f| f.save_depth == 0)
            .map(|f| (f.state.clone(), f.phase))
    }) else {
        return Ok(());
    };
    let step = Step::Checkpoint {
        name: name.map(str::to_string),
        run: how,
        at,
    };
    match phase {
        Phase::Forward => {
            lock(outer.path()).record(step);
            Ok(())
        }
        Phase::Recompute => lock(outer.path())
            .follow(outer.name(), step)
            .map_err(|m| outer.error(m)),
    }
}

/// The output of a checkpoint's closure as its caller receives it, inside
/// the checkpoint: no ask of the checkpoint itself (rule K5), only of the
/// checkpoints around it whose forward is running (rule K8). A body that
/// runs as plain code (its checkpoint switched off by the plan, or grad
/// mode off) has no frame of its own: the innermost frame is its caller's,
/// which is asked too.
pub(crate) fn returned_inside<O: CheckpointOutput>(out: O, at: At) -> O::Output {
    if O::HOLDS_SAVED {
        ask_output(&out, !frame::in_plain_body(), at);
    }
    out.into_output(token())
}

/// The same, where the body ran as plain code in its caller (a checkpoint
/// switched off): the value is bare code of every running checkpoint.
pub(crate) fn returned_plain<O: CheckpointOutput>(out: O, at: At) -> O::Output {
    if O::HOLDS_SAVED {
        ask_output(&out, false, at);
    }
    out.into_output(token())
}

fn ask_output<O: CheckpointOutput>(out: &O, skip_innermost: bool, at: At) {
    let mut tensors = Vec::new();
    out.visit(&mut |t| tensors.push(t.shallow_clone()), token());
    asked(&tensors, skip_innermost, &Asker::Returned, at);
}
