//! Checkpoints: run a closure, drop what autograd saved inside it, and replay
//! the closure in backward when the first of those tensors is needed.

use crate::bridge::{grad_enabled, grad_fn_saved, GradModeGuard};
use crate::error::{catch_quietly, panic_message, Error, Result};
use crate::frame::{self, Phase};
use crate::holder::{lock, ForwardHooks, ForwardSave, Holder, ReplayHooks};
use crate::io::{CheckpointInputs, RegionOutput};
use crate::nodes;
use crate::persist::PersistIndex;
use crate::save_region::SaveRecord;
use crate::saved_hooks::{SavedTensorKind, SavedTensorsHooks, TensorHooks};
use crate::state_hooks::{restore_all, snapshot_all, RecomputeStateHook, RestoreOnDrop, Snapshots};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tch::{Device, Kind, Tensor};

/// How replay is checked against the forward.
///
/// ```
/// use remat_runtime::{checkpoint, Determinism};
/// let ckpt = checkpoint("block").determinism(Determinism::Metadata);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Determinism {
    /// Only the number of saved tensors is checked.
    #[default]
    None,
    /// Each refilled tensor must have the shape, dtype and device of the
    /// original save.
    Metadata,
    /// Debugging mode: also keeps the original values (memory!) and requires
    /// replay to reproduce them bit for bit.
    Bitwise,
}

/// Shape, dtype and device of a saved tensor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TensorMeta {
    sizes: Vec<i64>,
    kind: Kind,
    device: Device,
}

impl TensorMeta {
    fn of(t: &Tensor) -> Self {
        TensorMeta {
            sizes: t.size(),
            kind: t.kind(),
            device: t.device(),
        }
    }
}

impl Determinism {
    pub(crate) fn record(self, saves: &mut Vec<ForwardSave>, t: &Tensor) {
        saves.push(match self {
            Determinism::None => ForwardSave::Nothing,
            Determinism::Metadata => ForwardSave::Meta(TensorMeta::of(t)),
            Determinism::Bitwise => ForwardSave::Value(TensorMeta::of(t), t.copy()),
        });
    }

    pub(crate) fn check(
        self,
        saves: &[ForwardSave],
        index: usize,
        t: &Tensor,
    ) -> Result<(), String> {
        let (meta, value) = match saves.get(index) {
            Some(ForwardSave::Meta(m)) => (m, None),
            Some(ForwardSave::Value(m, v)) => (m, Some(v)),
            _ => return Ok(()),
        };
        let now = TensorMeta::of(t);
        if &now != meta {
            return Err(format!(
                "saved tensor {index} differs between forward and replay: forward saved \
                 {meta:?}, replay {now:?}; the closure must compute the same thing both times"
            ));
        }
        if let Some(v) = value {
            if !v.equal(t) {
                return Err(format!(
                    "saved tensor {index} ({:?}) has other values on replay than on the \
                     forward (Determinism::Bitwise); something in the closure is not \
                     deterministic (an RNG without a state hook?)",
                    meta.sizes
                ));
            }
        }
        Ok(())
    }
}

type Body = Box<dyn FnMut(Vec<Option<Tensor>>) -> Vec<Option<Tensor>> + Send>;

/// Everything one call of a checkpoint shares between its forward, the
/// holders in its graph and its replays.
pub(crate) struct CheckpointState {
    pub name: Option<Arc<str>>,
    pub determinism: Determinism,
    pub state_hooks: Vec<Arc<dyn RecomputeStateHook>>,
    body: Mutex<Body>,
    /// Output of the node that saved the inputs (None when grad was off).
    input_saver: Mutex<Option<Tensor>>,
    /// Which flat inputs were present (absent ones are not saved).
    present: Vec<bool>,
    /// Serialises replays of this checkpoint.
    replay_lock: Mutex<()>,
    pub inner: Mutex<Inner>,
}

#[derive(Default)]
pub(crate) struct Inner {
    pub holders: Vec<Weak<Holder>>,
    pub forward_saves: Vec<ForwardSave>,
    pub replay_count: usize,
    pub replay_error: Option<String>,
    replayed: HashSet<i64>,
    pub records: HashMap<String, Arc<SaveRecord>>,
    /// The same records in forward order.
    pub order: Vec<Arc<SaveRecord>>,
    pub persist: PersistIndex,
    entry_snapshots: Snapshots,
}

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// How many checkpoint calls still have state alive (their graph, or a
/// replay, holds it). Diagnostics: a graph dropped without backward frees
/// its checkpoints' state, so this returns to its earlier value.
///
/// ```
/// assert_eq!(remat_runtime::live_checkpoints(), 0);
/// ```
pub fn live_checkpoints() -> usize {
    LIVE.load(Ordering::SeqCst)
}

impl Drop for CheckpointState {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

impl CheckpointState {
    pub(crate) fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or("<unnamed>")
    }

    /// `checkpoint::region`, or the region alone in an unnamed checkpoint.
    pub(crate) fn region_display(&self, region: &str) -> String {
        match &self.name {
            Some(n) => format!("{n}::{region}"),
            None => region.to_string(),
        }
    }

    fn error(&self, message: impl Into<String>) -> Error {
        Error::Checkpoint {
            checkpoint: self.display_name().to_string(),
            message: message.into(),
        }
    }

    /// Replays the closure once for backward `task`, filling the holders.
    pub(crate) fn replay_if_needed(self: &Arc<Self>, task: i64) -> Result<()> {
        let _serial = lock(&self.replay_lock);
        if lock(&self.inner).replayed.contains(&task) {
            return Ok(());
        }
        let inputs = self.saved_inputs()?;
        // Its tape is being rebuilt: no longer a forward's saved state.
        crate::saved_report::unregister(self);
        {
            let mut inner = lock(&self.inner);
            inner.replay_count = 0;
            inner.replay_error = None;
        }
        let outcome = {
            let _hooks = SavedTensorsHooks::push(Some(Arc::new(ReplayHooks {
                state: self.clone(),
                task,
            })));
            let _grad = GradModeGuard::new(true);
            let _frame = frame::push(self.clone(), Phase::Recompute, None);
            let outer = RestoreOnDrop {
                hooks: &self.state_hooks,
                snapshots: snapshot_all(&self.state_hooks),
            };
            restore_all(&self.state_hooks, &lock(&self.inner).entry_snapshots);
            // The forward holds the body while it runs: a backward through
            // this checkpoint's own saves from inside its closure would wait
            // for itself.
            let mut body =
                match self.body.try_lock() {
                    Ok(body) => body,
                    Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                    Err(std::sync::TryLockError::WouldBlock) => return Err(self.error(
                        "backward reached this checkpoint's saved tensors while its closure was \
                         still running (a backward inside the closure); compute that gradient \
                         outside the checkpoint",
                    )),
                };
            let outcome = catch_quietly(|| (body)(inputs));
            drop(outer);
            outcome
        };
        if let Err(payload) = outcome {
            return Err(self.error(format!("replay failed: {}", panic_message(&*payload))));
        }
        let mut inner = lock(&self.inner);
        if let Some(message) = inner.replay_error.take() {
            return Err(self.error(message));
        }
        if inner.replay_count != inner.holders.len() {
            return Err(self.error(format!(
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

    fn saved_inputs(&self) -> Result<Vec<Option<Tensor>>> {
        let saver = lock(&self.input_saver);
        let saver = saver
            .as_ref()
            .ok_or_else(|| Error::Internal("replay of a checkpoint without saved inputs".into()))?;
        let mut next = 0;
        self.present
            .iter()
            .map(|&present| {
                if !present {
                    return Ok(None);
                }
                let t = grad_fn_saved(saver, next).map_err(|e| {
                    self.error(format!("cannot read checkpoint input {next} back: {e}"))
                })?;
                next += 1;
                Ok(Some(t))
            })
            .collect()
    }
}

/// Options of one checkpoint; run it with [`Checkpoint::call`].
///
/// ```
/// use remat_runtime::{checkpoint, recompute_needs_tensor, region, Policy};
/// use tch::{Kind, Tensor};
///
/// let w = Tensor::randn([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let x = Tensor::randn([2, 4], tch::kind::FLOAT_CPU);
/// let w2 = w.shallow_clone();
/// let y = checkpoint("block").call(&x, move |x| {
///     let h = region("proj", Policy::Save).call(&x, |x| x.matmul(&w2));
///     recompute_needs_tensor(&h); // bare code below reads it on replay
///     h.relu()
/// });
/// y.sum(Kind::Float).backward(); // replays `relu`, not `proj`
/// ```
#[must_use = "a checkpoint does nothing until `call`ed"]
pub struct Checkpoint {
    name: Option<String>,
    determinism: Determinism,
    state_hooks: Vec<Arc<dyn RecomputeStateHook>>,
    saved_tensors_hooks: Option<TensorHooks>,
}

/// A checkpoint named `name` (shown in errors and reports as the prefix of
/// its regions' names: `name::region`). Use `""` for an unnamed one.
///
/// ```
/// let ckpt = remat_runtime::checkpoint("layers.0");
/// ```
pub fn checkpoint(name: impl Into<String>) -> Checkpoint {
    let name = name.into();
    Checkpoint {
        name: (!name.is_empty()).then_some(name),
        determinism: Determinism::None,
        state_hooks: Vec::new(),
        saved_tensors_hooks: None,
    }
}

impl Checkpoint {
    /// How replay is checked against the forward (default: count only).
    ///
    /// With [`Determinism::Metadata`], a replay that saves a tensor of
    /// another shape than the forward did is an error of the backward:
    ///
    /// ```
    /// use remat_runtime::{backward_with, checkpoint, is_recomputing, Determinism};
    /// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("block")
    ///     .determinism(Determinism::Metadata)
    ///     .call(&x, |x| {
    ///         // A bug: replay computes on a different shape.
    ///         let x = if is_recomputing() { x.repeat([2]) } else { x };
    ///         x.sin().sum(tch::Kind::Float)
    ///     });
    /// let err = backward_with(&y, false).unwrap_err();
    /// assert!(err.to_string().contains("differs between forward and replay"));
    /// ```
    pub fn determinism(mut self, determinism: Determinism) -> Self {
        self.determinism = determinism;
        self
    }

    /// Adds a hook whose state replay must see as the forward did.
    ///
    /// ```
    /// # use remat_runtime::*;
    /// # struct NoState;
    /// # impl RecomputeStateHook for NoState {
    /// #     fn snapshot(&self) -> Box<dyn std::any::Any + Send> { Box::new(()) }
    /// #     fn restore(&self, _: &(dyn std::any::Any + Send)) {}
    /// # }
    /// let ckpt = checkpoint("block").state_hook(NoState);
    /// ```
    pub fn state_hook(mut self, hook: impl RecomputeStateHook) -> Self {
        self.state_hooks.push(Arc::new(hook));
        self
    }

    /// Saved-tensor hooks for this checkpoint (instead of those pushed
    /// around it): they pack its inputs ([`SavedTensorKind::CheckpointInput`]),
    /// the saves of its `Save` regions (`Backward`) and the `Save` outputs
    /// kept for replay (`SaveOutput`).
    ///
    /// ```
    /// use remat_runtime::{checkpoint, TensorHooks};
    /// let offload = TensorHooks::new(|t: tch::Tensor| t, |t: &tch::Tensor| t.shallow_clone());
    /// let ckpt = checkpoint("block").saved_tensors_hooks(offload);
    /// ```
    pub fn saved_tensors_hooks(mut self, hooks: TensorHooks) -> Self {
        self.saved_tensors_hooks = Some(hooks);
        self
    }

    /// Adds a shared state hook: one hook value for several checkpoints.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, RecomputeStateHook, RngStateHook};
    /// use std::sync::Arc;
    /// let rng: Arc<dyn RecomputeStateHook> = Arc::new(RngStateHook::cpu());
    /// let x = tch::Tensor::ones([8], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let a = checkpoint("a").state_hook_arc(rng.clone()).call(&x, |x| x.dropout(0.5, true));
    /// let b = checkpoint("b").state_hook_arc(rng).call(&a, |a| a.dropout(0.5, true));
    /// b.sum(tch::Kind::Float).backward();
    /// // Both replays drew the forward's masks: the gradient is zero where `b` is.
    /// assert!(x.grad().ne(0.0).equal(&b.ne(0.0)));
    /// ```
    pub fn state_hook_arc(mut self, hook: Arc<dyn RecomputeStateHook>) -> Self {
        self.state_hooks.push(hook);
        self
    }

    /// Runs `body` on `inputs` as a checkpoint and returns its output.
    ///
    /// `body` receives the inputs owned (they are read back from autograd on
    /// replay) and is replayed inside backward, so it owns what else it uses.
    /// Panics where [`Checkpoint::try_call`] returns an error; errors during
    /// replay are returned by the backward that triggered it.
    ///
    /// ```
    /// use remat_runtime::checkpoint;
    /// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// use std::sync::Arc;
    /// use tch::{Kind, Tensor};
    ///
    /// let runs = Arc::new(AtomicUsize::new(0));
    /// let counter = runs.clone();
    /// let x = Tensor::from_slice(&[0.5f32, 1.0]).set_requires_grad(true);
    /// let y = checkpoint("block").call(&x, move |x| {
    ///     counter.fetch_add(1, SeqCst);
    ///     x.sin().exp()
    /// });
    /// assert_eq!(runs.load(SeqCst), 1);
    /// y.sum(Kind::Float).backward(); // replays the closure for its saved tensors
    /// assert_eq!(runs.load(SeqCst), 2);
    /// let expected = x.cos() * x.sin().exp(); // d/dx exp(sin x)
    /// assert!(x.grad().allclose(&expected, 1e-6, 1e-6, false));
    /// ```
    pub fn call<I, O, F>(self, inputs: I, body: F) -> O
    where
        I: CheckpointInputs,
        O: RegionOutput,
        F: Fn(I::Owned) -> O + Send + 'static,
    {
        match self.run(inputs, body) {
            Ok(out) => out,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`Checkpoint::call`], returning errors (and panics of the body on
    /// the forward) as `Err`.
    ///
    /// ```
    /// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
    /// let r = remat_runtime::checkpoint("c").try_call(&x, |x: tch::Tensor| -> tch::Tensor { panic!("bad") });
    /// assert!(r.unwrap_err().to_string().contains("bad"));
    /// ```
    pub fn try_call<I, O, F>(self, inputs: I, body: F) -> Result<O>
    where
        I: CheckpointInputs,
        O: RegionOutput,
        F: Fn(I::Owned) -> O + Send + 'static,
    {
        let name = self.name.clone().unwrap_or_else(|| "<unnamed>".into());
        catch_quietly(|| self.run(inputs, body)).unwrap_or_else(|p| {
            Err(Error::Checkpoint {
                checkpoint: name,
                message: panic_message(&*p),
            })
        })
    }

    fn run<I, O, F>(self, inputs: I, body: F) -> Result<O>
    where
        I: CheckpointInputs,
        O: RegionOutput,
        F: Fn(I::Owned) -> O + Send + 'static,
    {
        let mut flat = Vec::new();
        inputs.flatten(&mut flat);
        let mut lens = Vec::new();
        inputs.lens(&mut lens);
        let owned =
            move |flat: Vec<Option<Tensor>>| I::rebuild(&mut lens.iter(), &mut flat.into_iter());

        if !grad_enabled() {
            return Ok(body(owned(flat)));
        }

        let present: Vec<bool> = flat.iter().map(Option::is_some).collect();
        let saved: Vec<&Tensor> = flat.iter().flatten().collect();
        // An explicit pair wins over one pushed around the checkpoint.
        let user_hooks = self.saved_tensors_hooks.or_else(TensorHooks::ambient);
        let saver = {
            let _inputs = user_hooks
                .as_ref()
                .map(|h| h.push_as(SavedTensorKind::CheckpointInput));
            nodes::save_inputs(&saved)?
        };
        let erased: Body = Box::new(move |flat| {
            let out = body(owned(flat)).into_parts();
            // Also on replay: the boundary's saves are the last holders.
            out.into_iter()
                .map(|t| t.map(|t| nodes::boundary(t).unwrap_or_else(|e| panic!("{e}"))))
                .collect()
        });
        LIVE.fetch_add(1, Ordering::SeqCst);
        let state = Arc::new(CheckpointState {
            name: self.name.map(Arc::from),
            determinism: self.determinism,
            state_hooks: self.state_hooks,
            body: Mutex::new(erased),
            input_saver: Mutex::new(Some(saver)),
            present,
            replay_lock: Mutex::new(()),
            inner: Mutex::new(Inner::default()),
        });
        crate::saved_report::register(&state);
        let parts = {
            let _hooks = SavedTensorsHooks::push(Some(Arc::new(ForwardHooks(state.clone()))));
            let _frame = frame::push(state.clone(), Phase::Forward, user_hooks);
            lock(&state.inner).entry_snapshots = snapshot_all(&state.state_hooks);
            // A panic unwinds through the guards: nothing stays installed.
            let mut body = lock(&state.body);
            (body)(flat)
        };
        if parts.iter().any(Option::is_none) {
            return Err(state.error(
                "the closure must return tensors (a tensor, or a tuple or Vec of them); \
                 it returned None for an output",
            ));
        }
        O::from_parts(parts)
    }
}
