//! The state one checkpoint call shares between its forward, the holders in
//! its graph and its replays; and the node its inputs are saved on (rule
//! C1), from which a replay reads them back.
//!
//! Invariants: the state holds no tensor with a `grad_fn` from inside the
//! checkpoint (outputs are referenced weakly, kept values are detached), so
//! no reference cycle keeps a graph alive: dropping the graph frees the
//! state. Replay reaches it through the holder that backward unpacks, never
//! through the forward thread's thread-locals. Everything here is data; the
//! mechanism that uses it lives in the files above (`holder`, `region`,
//! `save_region`, `checkpoint`).
//!
//! docs/semantics.md rules kept here: M1 (state per checkpoint call), M2
//! (reached through the holder), M3 (no cycles), D4 (the registry of live
//! states, weak), D6 (`live_checkpoints`), C1 (inputs saved on a node).

use crate::bridge::{attach_node, no_grad, AutocastState, NodeBackward, SavedAccess, WeakStorage};
use crate::checkpointing::auto::Resolved;
use crate::checkpointing::capacity;
use crate::checkpointing::determinism::{Determinism, ForwardSave};
use crate::checkpointing::early_stop::StopState;
use crate::checkpointing::path::Path;
use crate::checkpointing::random_state::RandomState;
use crate::checkpointing::recompute_start::Told;
use crate::checkpointing::save_region::persist::PersistIndex;
use crate::checkpointing::save_region::record::{region_path, SaveRecord};
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::hooks::state_hooks::{RecomputeStateHook, Snapshots};
use crate::recorders::timing::CheckpointCall;
use crate::sync::lock;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tch::Tensor;

/// The checkpoint's closure, type-erased over its inputs and outputs: the
/// output's parts and layout (`RegionOutput::into_parts`).
pub(crate) type Body =
    Box<dyn FnMut(Vec<Option<Tensor>>) -> (Vec<Option<Tensor>>, Vec<usize>) + Send>;

/// Everything one call of a checkpoint shares.
pub(crate) struct CheckpointState {
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
    /// The forward's closure has not returned yet.
    pub forward_running: AtomicBool,
    pub body: Mutex<Body>,
    /// Output of the node that saved the inputs (None when grad was off).
    pub input_saver: Mutex<Option<Tensor>>,
    /// Which flat inputs were present (absent ones are not saved).
    pub present: Vec<bool>,
    /// Its inputs as saved for replay (reports only).
    pub inputs: Vec<KeptInput>,
    /// Serialises replays of this checkpoint.
    pub replay_lock: Mutex<()>,
    /// `Save` outputs by storage (its own lock: persisting runs user hooks,
    /// which must not run under `inner`'s).
    pub persist: Mutex<PersistIndex>,
    pub inner: Mutex<Inner>,
    /// The active plan's decision, taken when the forward started: `Auto`
    /// regions read it on the forward and on every replay alike.
    pub auto: Resolved,
    /// Where the forward's and the replays' timings go when profiling (`None` otherwise).
    pub profile: Option<Arc<Mutex<CheckpointCall>>>,
    /// The thread's autocast state when the forward started.
    pub autocast: AutocastState,
    /// The default generators as the forward found them (rule C14).
    pub random: RandomState,
    /// What the forward did that recomputation must do again, and the
    /// running recomputation's place in it (rule R11). Its own lock: asks
    /// note steps while `inner` may be held by nothing, and regions check
    /// them on every call.
    pub path: Mutex<Path>,
    /// The user's saved-tensor hooks to tell when recomputation starts
    /// (rule T9).
    pub told: Told,
}

/// The mutable part of a [`CheckpointState`].
#[derive(Default)]
pub(crate) struct Inner {
    /// One per save of the forward, in save order.
    pub holders: Vec<Weak<HolderSlot>>,
    pub forward_saves: Vec<ForwardSave>,
    /// Saves made so far by the running replay.
    pub replay_count: usize,
    /// The first error a replay's hooks met (they cannot return it).
    pub replay_error: Option<String>,
    /// What the running replay must still rebuild, and whether it stopped.
    pub stop: StopState,
    /// `Save` regions of the forward with saves rebuilt on replay (S3):
    /// replay must reach each before it may stop.
    pub rebuild_regions: usize,
    /// Graph tasks this checkpoint has replayed for.
    pub replayed: HashSet<i64>,
    pub records: FastMap<Cow<'static, str>, Arc<SaveRecord>>,
    /// The same records in forward order.
    pub order: Vec<Arc<SaveRecord>>,
    pub entry_snapshots: Snapshots,
}

/// Where a replay puts the value of one forward save, per graph task (a
/// retained graph replays once per backward).
#[derive(Default)]
pub(crate) struct HolderSlot {
    values: Mutex<HashMap<i64, Option<Tensor>>>,
    /// The forward's value, detached, while the forward of a checkpoint
    /// whose closure computes gradients itself runs (C16).
    forward: Mutex<Option<Tensor>>,
}

impl HolderSlot {
    /// A slot that keeps `value` until the forward ends (C16).
    pub(crate) fn keeping(value: Tensor) -> HolderSlot {
        HolderSlot {
            values: Mutex::default(),
            forward: Mutex::new(Some(value)),
        }
    }

    /// The forward's value, while the forward runs (C16).
    pub(crate) fn forward_value(&self) -> Option<Tensor> {
        lock(&self.forward).as_ref().map(Tensor::shallow_clone)
    }

    /// Lets go of the forward's value: the forward ended.
    pub(crate) fn end_forward(&self) {
        lock(&self.forward).take();
    }

    pub(crate) fn fill(&self, task: i64, value: Tensor) {
        lock(&self.values).insert(task, Some(value));
    }

    /// The value replay put here for `task`, once.
    pub(crate) fn take(&self, task: i64) -> Option<Tensor> {
        lock(&self.values).remove(&task).flatten()
    }
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

/// What a new [`CheckpointState`] starts from.
pub(crate) struct StateOptions {
    pub name: Option<Arc<str>>,
    pub determinism: Determinism,
    pub state_hooks: Vec<Arc<dyn RecomputeStateHook>>,
    pub strict: bool,
    pub early_stop: bool,
    pub backward_inside: bool,
    pub body: Body,
    pub input_saver: Tensor,
    pub present: Vec<bool>,
    pub inputs: Vec<KeptInput>,
    pub auto: Resolved,
    pub profile: Option<Arc<Mutex<CheckpointCall>>>,
    /// The thread's autocast state when the forward started.
    pub autocast: AutocastState,
    /// The default generators at the forward's entry (rule C14).
    pub random: RandomState,
}

impl CheckpointState {
    /// A live state, counted and registered for the reports.
    pub(crate) fn new(options: StateOptions) -> Arc<Self> {
        LIVE.fetch_add(1, Ordering::SeqCst);
        let sizes = capacity::last(options.name.as_deref());
        let state = Arc::new(CheckpointState {
            name: options.name,
            determinism: options.determinism,
            state_hooks: options.state_hooks,
            strict: options.strict,
            early_stop: options.early_stop,
            backward_inside: options.backward_inside,
            forward_running: AtomicBool::new(true),
            body: Mutex::new(options.body),
            input_saver: Mutex::new(Some(options.input_saver)),
            present: options.present,
            inputs: options.inputs,
            replay_lock: Mutex::new(()),
            persist: Mutex::new(PersistIndex::with_capacity(sizes.persisted)),
            inner: Mutex::new(Inner {
                records: FastMap::with_capacity_and_hasher(sizes.records, Default::default()),
                order: Vec::with_capacity(sizes.records),
                ..Inner::default()
            }),
            auto: options.auto,
            profile: options.profile,
            autocast: options.autocast,
            random: options.random,
            // docs/semantics.md, rule R11: recorded and checked unless the
            // checkpoint checks nothing but the count.
            path: Mutex::new(Path::new(
                options.determinism != Determinism::None,
                sizes.steps,
                sizes.records,
            )),
            told: Told::default(),
        });
        let mut registry = lock(&REGISTRY);
        registry.retain(|w| w.strong_count() > 0);
        registry.push(Arc::downgrade(&state));
        state
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
        self.name.as_deref().unwrap_or("<unnamed>")
    }

    /// `checkpoint::region`, or the region alone in an unnamed checkpoint.
    pub(crate) fn region_display(&self, region: &str) -> String {
        region_path(self.name.as_deref(), region)
    }

    /// The forward's closure returned (or unwound): holders let go of the
    /// values they kept for a backward inside it (C16).
    pub(crate) fn end_forward(&self) {
        self.forward_running.store(false, Ordering::SeqCst);
        // docs/semantics.md, rule C14: a forward that drew nothing keeps no
        // snapshot of the generators.
        self.random.end_forward();
        if self.backward_inside {
            let holders: Vec<_> = lock(&self.inner).holders.clone();
            for slot in holders.iter().filter_map(Weak::upgrade) {
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

/// Saves the checkpoint's inputs as autograd saved tensors (so their
/// lifetime follows the graph and saved-tensor hooks see them), on a node
/// whose output nothing uses: its backward never runs.
struct SaveInputs;

impl NodeBackward for SaveInputs {
    fn backward(
        &mut self,
        _: &SavedAccess<'_>,
        _: Vec<Tensor>,
    ) -> Result<Vec<Option<Tensor>>, String> {
        Err("remat internal error: the checkpoint input saver was backpropagated".into())
    }
}

thread_local! {
    static SAVING_INPUTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as saving a checkpoint's inputs until dropped, so that
/// whoever packs them (the whole-model report's tracker) can tell them from
/// activations.
pub(crate) struct SavingInputs(bool);

pub(crate) fn saving_inputs() -> SavingInputs {
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
/// [`crate::bridge::grad_fn_saved`] on the returned tensor.
pub(crate) fn save_inputs(inputs: &[&Tensor]) -> Result<Tensor> {
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
