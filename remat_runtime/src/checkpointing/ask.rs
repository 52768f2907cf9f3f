//! Asking for save outputs (docs/semantics.md, "Asking for a Save
//! output"): the checkpoints that must keep a value bare code reads, and
//! the values a checkpoint returns.
//!
//! Invariant: a value is asked of every checkpoint whose forward runs on
//! this thread, the innermost included unless the value is the innermost
//! checkpoint's own return value (rules K5 and K8).

use crate::checkpointing::frame;
use crate::checkpointing::save_region::persist::persist;
use crate::error::Result;
use crate::io::RegionInput;
use crate::saved::arg::Token;
use crate::saved::returned::CheckpointOutput;

/// Asks every checkpoint whose forward runs on this thread (all but the
/// innermost with `skip_innermost`) to keep the `Save` outputs in `value`.
///
/// docs/semantics.md, rules K4 and K8: a value read by bare code of a nested
/// checkpoint is read again when the outer checkpoint replays, so the outer
/// one must keep it too; a checkpoint whose forward has ended, or that is
/// replaying, has nothing to keep.
pub(crate) fn ask<T: RegionInput + ?Sized>(value: &T, skip_innermost: bool) -> Result<()> {
    let (first, more) = frame::forward_states(skip_innermost);
    for state in first.iter().chain(&more) {
        persist(&state.persist, &value)?;
    }
    Ok(())
}

/// [`ask`], panicking as `recompute_needs_tensor` does on a failure to keep
/// (a pack hook's error, which names the region and output).
pub(crate) fn asked<T: RegionInput + ?Sized>(value: &T, skip_innermost: bool) {
    if let Err(e) = ask(value, skip_innermost) {
        panic!("{e}");
    }
}

/// The output of a checkpoint's closure as its caller receives it, inside
/// the checkpoint: no ask of the checkpoint itself (rule K5), only of the
/// checkpoints around it whose forward is running (rule K8). A body that
/// runs as plain code (its checkpoint switched off by the plan, or grad
/// mode off) has no frame of its own: the innermost frame is its caller's,
/// which is asked too.
pub(crate) fn returned_inside<O: CheckpointOutput>(out: O) -> O::Output {
    if O::HOLDS_SAVED {
        ask_output(&out, !frame::in_plain_body());
    }
    out.into_output(Token::new())
}

/// The same, where the body ran as plain code in its caller (a checkpoint
/// switched off): the value is bare code of every running checkpoint.
pub(crate) fn returned_plain<O: CheckpointOutput>(out: O) -> O::Output {
    if O::HOLDS_SAVED {
        ask_output(&out, false);
    }
    out.into_output(Token::new())
}

fn ask_output<O: CheckpointOutput>(out: &O, skip_innermost: bool) {
    let mut tensors = Vec::new();
    out.visit(&mut |t| tensors.push(t.shallow_clone()));
    asked(&tensors, skip_innermost);
}
