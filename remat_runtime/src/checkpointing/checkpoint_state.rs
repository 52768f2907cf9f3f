//! The state one checkpoint call shares between its forward, the holders in
//! its graph and its replays.
//!
//! Invariants: the state holds no tensor with a `grad_fn` from inside the
//! checkpoint (outputs are referenced weakly, kept values are detached), so
//! no reference cycle keeps a graph alive: dropping the graph frees the
//! state. Replay reaches it through the holder that backward unpacks, never
//! through the forward thread's thread-locals.
//!
//! Every field is private. What a call was asked to do is fixed when its
//! forward starts ([`Settings`]); each protocol's mutable part is a type of
//! its own, with private fields, reached through one method here: the
//! holders and their refill (`holders::Holders`, the stop rule included),
//! the `Save` records (`save_region::records::Records`), the asks that keep
//! outputs (`save_region::keep::OutputIndex`), the path
//! (`path::Path`), the inputs (`inputs::SavedInputs`), the random state
//! and the hooks told of recomputation. The mechanism that uses them lives
//! in the files beside (`holder`, `replay`, `region`, `save_region`,
//! `checkpoint`).
//!
//! docs/semantics.md rules kept here: M1 (state per checkpoint call), M2
//! (reached through the holder), M3 (no cycles), D4 (the registry of live
//! states, weak), D6 (`live_checkpoints`), H2 (the entry snapshot, taken
//! once).

use crate::bridge::{self, AutocastState};
use crate::checkpointing::auto::Resolved;
use crate::checkpointing::capacity;
use crate::checkpointing::determinism::Determinism;
use crate::checkpointing::holders::Holders;
use crate::checkpointing::inputs::SavedInputs;
use crate::checkpointing::path::Path;
use crate::checkpointing::random_state::RandomState;
use crate::checkpointing::recompute_start::Told;
use crate::checkpointing::save_region::keep::OutputIndex;
use crate::checkpointing::save_region::record::region_path;
use crate::checkpointing::save_region::records::Records;
use crate::error::Error;
use crate::hooks::state_hooks::{RecomputeStateHook, Snapshots};
use crate::recorders::timing::CheckpointCall;
use crate::sync::lock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};
use tch::Tensor;

/// The checkpoint's closure, type-erased over its inputs and outputs: the
/// output's parts and layout (`RegionOutput::into_parts`).
pub(crate) type Body =
    Box<dyn FnMut(Vec<Option<Tensor>>) -> (Vec<Option<Tensor>>, Vec<usize>) + Send>;

/// What one checkpoint call was asked to do, fixed when its forward starts.
pub(crate) struct Settings {
    pub name: Option<Arc<str>>,
    pub determinism: Determinism,
    pub state_hooks: Vec<Arc<dyn RecomputeStateHook>>,
    /// Replay serves a placeholder for every `Save` output no consumer
    /// asked for, even one autograd keeps anyway.
    pub strict: bool,
    /// Replay ends once everything backward can still unpack is rebuilt
    /// (off under strict recomputation).
    pub early_stop: bool,
    /// The closure computes gradients itself: holders keep their values
    /// while its forward runs, and replays keep their graph's saves (C16).
    pub backward_inside: bool,
    /// The active plan's decision, taken when the forward started: `Auto`
    /// regions read it on the forward and on every replay alike.
    pub auto: Resolved,
    /// Where the forward's and the replays' timings go when profiling (`None` otherwise).
    pub profile: Option<Arc<Mutex<CheckpointCall>>>,
    /// The thread's autocast state when the forward started.
    pub autocast: AutocastState,
}

/// Everything one call of a checkpoint shares.
pub(crate) struct CheckpointState {
    settings: Settings,
    /// The forward's closure has not returned yet.
    forward_running: AtomicBool,
    body: Mutex<Body>,
    inputs: SavedInputs,
    /// Serialises replays of this checkpoint.
    replay_lock: Mutex<()>,
    holders: Mutex<Holders>,
    records: Mutex<Records>,
    /// The state hooks' snapshots at the forward's entry (rule H2).
    entry: Mutex<Snapshots>,
    /// `Save` outputs by storage (its own lock: keeping runs user hooks,
    /// which must not run under another of this state's locks).
    output_index: Mutex<OutputIndex>,
    /// The default generators as the forward found them (rule C14).
    random: RandomState,
    /// What the forward did that recomputation must do again, and the
    /// running recomputation's place in it (rule R11). Its own lock: asks
    /// note steps, and regions check them on every call.
    path: Mutex<Path>,
    /// The user's saved-tensor hooks to tell when recomputation starts
    /// (rule T9).
    told: Told,
}

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Live states, for the whole-model report (weak: the report never keeps a
/// graph alive).
static REGISTRY: Mutex<Vec<Weak<CheckpointState>>> = Mutex::new(Vec::new());

/// How many checkpoint calls still have state alive (their graph, or a
/// replay, holds it). Diagnostics: a graph dropped without backward frees
/// its checkpoints' state, so this returns to its earlier value.
///
/// ```
/// assert_eq!(remat_runtime::diagnostics::live_checkpoints(), 0);
/// ```
pub fn live_checkpoints() -> usize {
    LIVE.load(Ordering::SeqCst)
}

impl CheckpointState {
    /// A live state, counted and registered for the reports.
    pub(crate) fn new(
        settings: Settings,
        body: Body,
        inputs: SavedInputs,
        random: RandomState,
    ) -> Arc<Self> {
        LIVE.fetch_add(1, Ordering::SeqCst);
        let sizes = capacity::last(settings.name.as_deref());
        // docs/semantics.md, rule R11: recorded and checked unless the
        // checkpoint checks nothing but the count.
        let checks_path = settings.determinism != Determinism::None;
        let state = Arc::new(CheckpointState {
            settings,
            forward_running: AtomicBool::new(true),
            body: Mutex::new(body),
            inputs,
            replay_lock: Mutex::new(()),
            holders: Mutex::default(),
            records: Mutex::new(Records::with_capacity(sizes.records)),
            entry: Mutex::default(),
            output_index: Mutex::new(OutputIndex::with_capacity(sizes.indexed)),
            random,
            path: Mutex::new(Path::new(checks_path, sizes.steps, sizes.records)),
            told: Told::default(),
        });
        let mut registry = lock(&REGISTRY);
        registry.retain(|w| w.strong_count() > 0);
        registry.push(Arc::downgrade(&state));
        state
    }

    /// What the call was asked to do.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The checkpoint's name, if it has one.
    pub(crate) fn name(&self) -> Option<&str> {
        self.settings.name.as_deref()
    }

    /// The holders and their refill.
    pub(crate) fn holders(&self) -> MutexGuard<'_, Holders> {
        lock(&self.holders)
    }

    /// The `Save` regions the forward ran.
    pub(crate) fn records(&self) -> MutexGuard<'_, Records> {
        lock(&self.records)
    }

    /// The `Save` outputs a consumer may ask for, by storage.
    pub(crate) fn output_index(&self) -> &Mutex<OutputIndex> {
        &self.output_index
    }

    /// The forward's path, and a recomputation's place in it.
    pub(crate) fn path(&self) -> &Mutex<Path> {
        &self.path
    }

    /// The running recomputation has rebuilt everything (docs/semantics.md,
    /// rule C17): from here on it runs dry and its path is not checked
    /// (R11). Whether the save that got here must fail, which ends the op
    /// making it: asked with `end_op`, and only an op the stop's fallback
    /// runs can end so.
    pub(crate) fn stop_recomputation(&self, end_op: bool) -> bool {
        lock(&self.path).stop();
        bridge::stop_now(end_op)
    }

    /// The default generators as the forward found them.
    pub(crate) fn random(&self) -> &RandomState {
        &self.random
    }

    /// The user's hooks to tell when recomputation starts.
    pub(crate) fn told(&self) -> &Told {
        &self.told
    }

    /// The inputs as the forward saved them.
    pub(crate) fn inputs(&self) -> &SavedInputs {
        &self.inputs
    }

    /// Serialises replays of this checkpoint while held (rule C8).
    pub(crate) fn serialise_replays(&self) -> MutexGuard<'_, ()> {
        lock(&self.replay_lock)
    }

    /// The closure, for the forward that runs it first.
    pub(crate) fn body(&self) -> MutexGuard<'_, Body> {
        lock(&self.body)
    }

    /// The closure, for a replay: the forward holds it while it runs, so a
    /// backward through this checkpoint's own saves from inside its closure
    /// would wait for itself; that is E19 (rule C16), not a deadlock.
    pub(crate) fn body_for_replay(&self) -> Result<MutexGuard<'_, Body>, Error> {
        match self.body.try_lock() {
            Ok(body) => Ok(body),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(self.backward_inside_error()),
        }
    }

    /// Keeps the state hooks' snapshots at the forward's entry (rule H2).
    pub(crate) fn set_entry_snapshots(&self, snapshots: Snapshots) {
        *lock(&self.entry) = snapshots;
    }

    /// The state hooks' snapshots at the forward's entry (rule H2), which
    /// stay for the next backward of a retained graph (C8). Replays are
    /// serialised, so holding them while the hooks restore waits for none.
    pub(crate) fn entry_snapshots(&self) -> MutexGuard<'_, Snapshots> {
        lock(&self.entry)
    }

    /// Whether the forward's closure is still running (rule C16).
    pub(crate) fn forward_running(&self) -> bool {
        self.forward_running.load(Ordering::SeqCst)
    }

    /// Leaves the registry: its tape is being rebuilt by a replay, so it no
    /// longer holds a forward's saved state.
    pub(crate) fn unregister(&self) {
        lock(&REGISTRY).retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), self));
    }

    /// Every registered state still alive, in creation order.
    pub(crate) fn registered() -> Vec<Arc<CheckpointState>> {
        let mut registry = lock(&REGISTRY);
        registry.retain(|w| w.strong_count() > 0);
        registry.iter().filter_map(Weak::upgrade).collect()
    }

    pub(crate) fn display_name(&self) -> &str {
        self.name().unwrap_or("<unnamed>")
    }

    /// `checkpoint::region`, or the region alone in an unnamed checkpoint.
    pub(crate) fn region_display(&self, region: &str) -> String {
        region_path(self.name(), region)
    }

    /// The forward's closure returned (or unwound): holders let go of the
    /// values they kept for a backward inside it (C16).
    pub(crate) fn end_forward(&self) {
        self.forward_running.store(false, Ordering::SeqCst);
        // docs/semantics.md, rule C14: a forward that drew nothing keeps no
        // snapshot of the generators.
        self.random.end_forward();
        if self.settings.backward_inside {
            let live = self.holders().live();
            for slot in live {
                slot.end_forward();
            }
        }
    }

    /// E19: a backward inside the closure of a checkpoint that was not told
    /// (docs/semantics.md, rule C16).
    pub(crate) fn backward_inside_error(&self) -> Error {
        self.error(
            "backward reached this checkpoint's saved tensors while its closure was still \
             running (a backward inside the closure); call `.backward_inside(true)` on the \
             checkpoint (`#[checkpoint(backward_inside = true)]`) so that its saves stay \
             readable until the closure returns",
        )
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> Error {
        Error::Checkpoint {
            checkpoint: self.display_name().to_string(),
            message: message.into(),
        }
    }
}

impl Drop for CheckpointState {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}
