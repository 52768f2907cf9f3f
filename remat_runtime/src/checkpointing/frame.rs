//! Which checkpoint, in which phase, the current thread is running.
//!
//! A stack per thread: checkpoints nest, and replay pushes a frame on
//! whichever thread autograd runs it. Everything else a frame needs is
//! reached through its `Arc<CheckpointState>`, never through thread-locals of
//! the thread that ran the forward.
//!
//! Invariant: every push is undone by a guard's drop (also when unwinding),
//! so after any checkpoint call, replay or failure the stack is as before.
//!
//! docs/semantics.md rules kept here: M2 (any thread; state through the
//! frame's `Arc`), C15 (checkpoints nest: the innermost frame is the
//! running checkpoint), R4 (`save_depth`), A4 (`is_recomputing`), C11-C12
//! (the guards).

use crate::bridge::{hooks_depth, HookPair};
use crate::checkpointing::capacity;
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::tensor_hooks::TensorHooks;
use crate::fast_hash::FastSet;
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

/// The two runs of a checkpoint's closure (`is_recomputing()` tells them
/// apart from the outside).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The original run.
    Forward,
    /// The replay inside backward.
    Recompute,
}

impl Phase {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Recompute => "replay",
        }
    }
}

pub(crate) struct Frame {
    pub state: Arc<CheckpointState>,
    pub phase: Phase,
    /// Region names claimed in this phase.
    pub claimed: FastSet<Cow<'static, str>>,
    /// How many `Save` bodies are running (forward only); inside one, regions
    /// are inert.
    pub save_depth: usize,
    /// The pack of the running `Save` body: the checkpoint's own forward hook
    /// hands this frame's saves to it (no native hook level per region).
    pub save_pack: Option<Arc<dyn HookPair>>,
    /// The native hook stack's depth when the frame was pushed (just above
    /// the checkpoint's own hook).
    pub native_depth: usize,
    /// The user's saved-tensor hooks for `Save` regions of this frame.
    pub user_hooks: Option<TensorHooks>,
    /// The region running now (diagnostics: OOM reports, allocation sites).
    pub region: Option<Cow<'static, str>>,
    /// The open name scopes, each prefix followed by `/` (docs/semantics.md,
    /// rule R10): empty at every push, so the forward and each replay of the
    /// closure build the same names from the scopes the closure opens.
    pub scope: String,
}

thread_local! {
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// For each checkpoint body running as plain code (switched off, or grad
    /// mode off), how many frames were on the stack when it started.
    static PLAIN_BODIES: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Ends a plain body's entry in [`PLAIN_BODIES`] when dropped, also when
/// unwinding.
pub(crate) struct PlainBodyGuard;

/// Notes that a checkpoint's body runs as plain code in its caller until the
/// guard is dropped: no frame of its own is pushed for it.
pub(crate) fn enter_plain_body() -> PlainBodyGuard {
    let depth = FRAMES.with(|f| f.borrow().len());
    PLAIN_BODIES.with(|p| p.borrow_mut().push(depth));
    PlainBodyGuard
}

impl Drop for PlainBodyGuard {
    fn drop(&mut self) {
        PLAIN_BODIES.with(|p| p.borrow_mut().pop());
    }
}

/// Whether the innermost checkpoint body running on this thread is a plain
/// one (no frame pushed since it started), so that the innermost frame is
/// its caller's checkpoint, not its own.
pub(crate) fn in_plain_body() -> bool {
    let depth = FRAMES.with(|f| f.borrow().len());
    PLAIN_BODIES.with(|p| p.borrow().last() == Some(&depth))
}

/// Pops the frame it pushed when dropped, also when unwinding.
pub(crate) struct FrameGuard {
    depth: usize,
}

pub(crate) fn push(
    state: Arc<CheckpointState>,
    phase: Phase,
    user_hooks: Option<TensorHooks>,
) -> FrameGuard {
    FRAMES.with(|f| {
        let mut frames = f.borrow_mut();
        frames.push(Frame {
            state,
            phase,
            claimed: capacity::claimed_set(),
            save_depth: 0,
            save_pack: None,
            native_depth: hooks_depth(),
            user_hooks,
            region: None,
            scope: String::new(),
        });
        FrameGuard {
            depth: frames.len() - 1,
        }
    })
}

impl Drop for FrameGuard {
    fn drop(&mut self) {
        FRAMES.with(|f| {
            for mut frame in f.borrow_mut().drain(self.depth..) {
                capacity::recycle(std::mem::take(&mut frame.claimed));
            }
        });
    }
}

/// Closes a name scope when dropped, also when unwinding: the innermost
/// frame's scope goes back to what it was when the scope opened.
pub(crate) struct NameScopeGuard {
    /// The frame's depth and its scope's length before; `None` outside any
    /// checkpoint, where a scope names nothing.
    opened: Option<(usize, usize)>,
}

/// Opens the name scope `prefix` in the innermost frame until dropped.
pub(crate) fn enter_name_scope(prefix: &str) -> NameScopeGuard {
    FRAMES.with(|frames| {
        let mut frames = frames.borrow_mut();
        let depth = frames.len().checked_sub(1);
        let opened = depth.and_then(|depth| {
            let frame = frames.get_mut(depth)?;
            let before = frame.scope.len();
            frame.scope.push_str(prefix);
            frame.scope.push('/');
            Some((depth, before))
        });
        NameScopeGuard { opened }
    })
}

impl Drop for NameScopeGuard {
    fn drop(&mut self) {
        if let Some((depth, before)) = self.opened {
            FRAMES.with(|frames| {
                if let Some(frame) = frames.borrow_mut().get_mut(depth) {
                    frame.scope.truncate(before);
                }
            });
        }
    }
}

/// Runs `f` on the innermost frame, if any. `f` must not run user code.
pub(crate) fn with_top<R>(f: impl FnOnce(Option<&mut Frame>) -> R) -> R {
    FRAMES.with(|frames| f(frames.borrow_mut().last_mut()))
}

/// Counts a running `Save` body in the innermost frame until dropped, and
/// routes the frame's saves to `pack` meanwhile.
pub(crate) struct SaveBodyGuard;

pub(crate) fn enter_save_body(pack: Arc<dyn HookPair>) -> SaveBodyGuard {
    with_top(|f| {
        if let Some(f) = f {
            f.save_depth += 1;
            f.save_pack = Some(pack);
        }
    });
    SaveBodyGuard
}

impl Drop for SaveBodyGuard {
    fn drop(&mut self) {
        with_top(|f| {
            if let Some(f) = f {
                f.save_depth = f.save_depth.saturating_sub(1);
                if f.save_depth == 0 {
                    f.save_pack = None;
                }
            }
        });
    }
}

/// Puts back the region that ran before [`enter_region`] when dropped.
pub(crate) struct RegionGuard {
    depth: usize,
    previous: Option<Cow<'static, str>>,
}

/// Marks `name` as the running region of the innermost frame until the
/// guard is dropped.
pub(crate) fn enter_region(name: Cow<'static, str>) -> Option<RegionGuard> {
    FRAMES.with(|f| {
        let mut frames = f.borrow_mut();
        let depth = frames.len().checked_sub(1)?;
        let previous = frames[depth].region.replace(name);
        Some(RegionGuard { depth, previous })
    })
}

impl Drop for RegionGuard {
    fn drop(&mut self) {
        FRAMES.with(|f| {
            if let Some(frame) = f.borrow_mut().get_mut(self.depth) {
                frame.region = self.previous.take();
            }
        });
    }
}

/// Where this thread is: `checkpoint::region (forward)`, or `None` outside
/// checkpoints (diagnostics only).
pub(crate) fn describe_position() -> Option<String> {
    with_top(|f| {
        f.map(|f| {
            let place = match &f.region {
                Some(r) => f.state.region_display(r),
                None => f.state.display_name().to_string(),
            };
            format!("{place} ({})", f.phase.describe())
        })
    })
}

/// Whether the checkpoint's own hook is on top of the native hook stack, so
/// that it sees what the innermost frame's code saves.
pub(crate) fn own_hook_on_top() -> bool {
    let depth = hooks_depth();
    with_top(|f| f.is_some_and(|f| f.native_depth == depth))
}

/// The pack of the `Save` body running in `state`'s innermost frame, if
/// that frame is `state`'s (a nested checkpoint's frame hides it).
pub(crate) fn save_pack_of(state: &Arc<CheckpointState>) -> Option<Arc<dyn HookPair>> {
    with_top(|f| match f {
        Some(f) if Arc::ptr_eq(&f.state, state) => f.save_pack.clone(),
        _ => None,
    })
}

/// The checkpoints whose forward is running on this thread, innermost
/// first, without the innermost frame when `skip_innermost` (a value the
/// innermost checkpoint returns leaves it: docs/semantics.md, rule K5).
pub(crate) fn forward_states(
    skip_innermost: bool,
) -> (Option<Arc<CheckpointState>>, Vec<Arc<CheckpointState>>) {
    states_in(Phase::Forward, skip_innermost)
}

/// The checkpoints recomputing on this thread, innermost first, without the
/// innermost frame when `skip_innermost`: those an ask made now is checked
/// against (docs/semantics.md, rule R11).
pub(crate) fn recomputing_states(
    skip_innermost: bool,
) -> (Option<Arc<CheckpointState>>, Vec<Arc<CheckpointState>>) {
    states_in(Phase::Recompute, skip_innermost)
}

/// The checkpoints of the frames in `phase`, innermost first. Inline for
/// the usual one; allocates only when checkpoints of one phase nest.
fn states_in(
    phase: Phase,
    skip_innermost: bool,
) -> (Option<Arc<CheckpointState>>, Vec<Arc<CheckpointState>>) {
    FRAMES.with(|frames| {
        let frames = frames.borrow();
        let mut found = frames
            .iter()
            .rev()
            .skip(usize::from(skip_innermost))
            .filter(|f| f.phase == phase)
            .map(|f| f.state.clone());
        let first = found.next();
        (first, found.collect())
    })
}

/// Whether any checkpoint on this thread is replaying, the innermost or one
/// around it (a nested checkpoint's forward runs again inside its outer
/// checkpoint's replay).
pub(crate) fn any_recomputing() -> bool {
    FRAMES.with(|frames| frames.borrow().iter().any(|f| f.phase == Phase::Recompute))
}

/// Whether the current thread is replaying a checkpoint (inside backward).
///
/// ```
/// assert!(!remat_runtime::is_recomputing());
/// ```
pub fn is_recomputing() -> bool {
    with_top(|f| f.is_some_and(|f| f.phase == Phase::Recompute))
}

/// Puts back the user hooks a frame had before [`set_user_hooks`].
pub(crate) struct UserHooksRestore {
    depth: usize,
    previous: Option<TensorHooks>,
}

impl UserHooksRestore {
    pub(crate) fn restore(self) {
        FRAMES.with(|f| {
            if let Some(frame) = f.borrow_mut().get_mut(self.depth) {
                frame.user_hooks = self.previous;
            }
        });
    }
}

/// Inside a checkpoint, sets the user hooks of the innermost frame and says
/// how to undo it; outside one, returns `None` (they go to libtorch instead).
pub(crate) fn set_user_hooks(hooks: Option<TensorHooks>) -> Option<UserHooksRestore> {
    FRAMES.with(|f| {
        let mut frames = f.borrow_mut();
        let depth = frames.len().checked_sub(1)?;
        let frame = &mut frames[depth];
        // docs/semantics.md, rule T9: a pair pushed inside the forward is
        // told when the checkpoint recomputes, as the one around it is.
        if let (Some(h), Phase::Forward) = (&hooks, frame.phase) {
            frame.state.told().register(h);
        }
        let previous = std::mem::replace(&mut frame.user_hooks, hooks);
        Some(UserHooksRestore { depth, previous })
    })
}

/// The user hooks in effect for `Save` regions here, if any.
pub(crate) fn user_hooks() -> Option<TensorHooks> {
    with_top(|f| f.and_then(|f| f.user_hooks.clone()))
}
