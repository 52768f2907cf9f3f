//! A user's pack/unpack pair (`TensorHooks`) and what its pack hook can ask
//! (`current_saved_tensor_info`). Where a pair applies, and how it meets
//! checkpoints, is `saved_tensors`.
//!
//! Invariant: a pair's callbacks never unwind into the caller: panics become
//! `Err` strings; `INFO` is set only for the duration of one pack.
//!
//! docs/semantics.md rules kept here: T5 (`current_saved_tensor_info`), T6
//! (the capture callback), T7 (`parameter`), T8 (the pair's contract; E23).

use crate::bridge::Payload;
use crate::error::panic_message;
use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tch::Tensor;

/// What a pack hook is packing.
///
/// ```
/// use remat_runtime::{
///     checkpoint, current_saved_tensor_info, recompute_needs_tensor, region, Policy,
///     SavedTensorKind, TensorHooks,
/// };
/// use std::sync::{Arc, Mutex};
/// use tch::Tensor;
///
/// let kinds = Arc::new(Mutex::new(Vec::new()));
/// let seen = kinds.clone();
/// let hooks = TensorHooks::new(
///     move |t: Tensor| {
///         seen.lock().unwrap().push(current_saved_tensor_info().unwrap().kind);
///         t
///     },
///     |t: &Tensor| t.shallow_clone(),
/// );
/// let x = Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("block").saved_tensors_hooks(hooks).call(&x, |x| {
///     let h = region("exp", Policy::Save).call(&x, |x| x.exp());
///     recompute_needs_tensor(&h);
///     h.sin()
/// });
/// use SavedTensorKind::*;
/// // `x` on entry, what `exp` saves for backward, then `h` kept for replay.
/// assert_eq!(*kinds.lock().unwrap(), [CheckpointInput, Backward, SaveOutput]);
/// y.sum(tch::Kind::Float).backward();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SavedTensorKind {
    /// An input of a checkpoint (saved on entry, read back by replay).
    CheckpointInput,
    /// A tensor saved for backward (outside checkpoints, or inside a `Save`
    /// region).
    Backward,
    /// The output of a `Save` region, kept so that replay can serve it.
    SaveOutput,
}

/// Context for a pack hook: see [`current_saved_tensor_info`].
///
/// ```
/// use remat_runtime::{current_saved_tensor_info, SavedTensorKind, TensorHooks};
/// use std::sync::{Arc, Mutex};
/// use tch::Tensor;
///
/// let infos = Arc::new(Mutex::new(Vec::new()));
/// let seen = infos.clone();
/// let hooks = TensorHooks::with_capture(
///     move |t: Tensor| {
///         seen.lock().unwrap().push(current_saved_tensor_info().unwrap());
///         t
///     },
///     |t: &Tensor| t.shallow_clone(),
///     || "layer 3",
/// );
/// let x = Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// // Outside checkpoints the pair packs every save, without context.
/// let _a = {
///     let _scope = hooks.push();
///     x.sin()
/// };
/// // In a checkpoint, the capture callback runs for what a `Save` region keeps
/// // (here `exp`'s result, which it saves for backward).
/// let _b = remat_runtime::checkpoint("layer.3").saved_tensors_hooks(hooks).call(&x, |x| {
///     remat_runtime::region("exp", remat_runtime::Policy::Save).call(&x, |x| x.exp())
/// });
/// let infos = infos.lock().unwrap();
/// assert_eq!((infos[0].kind, infos[0].context.is_none()), (SavedTensorKind::Backward, true));
/// let kept = infos.iter().find(|i| i.context.is_some()).unwrap();
/// assert_eq!(kept.kind, SavedTensorKind::Backward);
/// assert_eq!(kept.context.as_ref().unwrap().downcast_ref::<&str>(), Some(&"layer 3"));
/// assert!(!kept.parameter);
/// ```
#[derive(Clone)]
pub struct SavedTensorInfo {
    /// What is being packed.
    pub kind: SavedTensorKind,
    /// What the pair's capture callback returned where the tensor was
    /// produced. The callback runs only for what a checkpoint keeps: the
    /// saves of a `Save` region (`Backward`) and the outputs kept for replay
    /// (`SaveOutput`). It is `None` for checkpoint inputs, for saves outside
    /// checkpoints, and without a callback.
    pub context: Option<Arc<dyn Any + Send + Sync>>,
    /// The tensor is a parameter (a leaf that requires grad) or a view of
    /// one (`w.tr()` saved by a linear layer). The pack hook receives a
    /// detached alias, which cannot tell: a hook that offloads activations
    /// usually keeps parameters as they are.
    pub parameter: bool,
}

impl std::fmt::Debug for SavedTensorInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedTensorInfo")
            .field("kind", &self.kind)
            .field("context", &self.context.as_ref().map(|_| ".."))
            .field("parameter", &self.parameter)
            .finish()
    }
}

thread_local! {
    static INFO: RefCell<Option<SavedTensorInfo>> = const { RefCell::new(None) };
}

/// Inside a pack hook that remat runs: what it is packing and the captured
/// context. `None` anywhere else.
///
/// ```
/// use remat_runtime::{current_saved_tensor_info, SavedTensorKind, TensorHooks};
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let _h = TensorHooks::new(
///     |t: tch::Tensor| {
///         assert_eq!(current_saved_tensor_info().unwrap().kind, SavedTensorKind::Backward);
///         t
///     },
///     |t: &tch::Tensor| t.shallow_clone(),
/// )
/// .push();
/// let _y = x.sin();
/// assert!(current_saved_tensor_info().is_none());
/// ```
pub fn current_saved_tensor_info() -> Option<SavedTensorInfo> {
    INFO.with(|i| i.borrow().clone())
}

/// A pack/unpack pair as remat uses it (object safe).
trait UserPair: Send + Sync + 'static {
    fn pack(&self, tensor: Tensor) -> Result<Payload, String>;
    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String>;
    fn capture(&self) -> Option<Arc<dyn Any + Send + Sync>>;
}

type Capture = Box<dyn Fn() -> Arc<dyn Any + Send + Sync> + Send + Sync>;

struct ClosurePair<P, Pack, Unpack> {
    pack: Pack,
    unpack: Unpack,
    capture: Option<Capture>,
    _payload: PhantomData<fn() -> P>,
}

impl<P, Pack, Unpack> UserPair for ClosurePair<P, Pack, Unpack>
where
    P: Send + 'static,
    Pack: Fn(Tensor) -> P + Send + Sync + 'static,
    Unpack: Fn(&P) -> Tensor + Send + Sync + 'static,
{
    fn pack(&self, tensor: Tensor) -> Result<Payload, String> {
        catch_unwind(AssertUnwindSafe(|| (self.pack)(tensor)))
            .map(|p| Box::new(p) as Payload)
            .map_err(|e| format!("pack hook panicked: {}", panic_message(&*e)))
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String> {
        let payload = payload
            .downcast_ref::<P>()
            .ok_or("unpack hook got a payload of another pair")?;
        catch_unwind(AssertUnwindSafe(|| (self.unpack)(payload)))
            .map_err(|e| format!("unpack hook panicked: {}", panic_message(&*e)))
    }

    fn capture(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        self.capture.as_ref().map(|c| c())
    }
}

/// A pack/unpack pair, to [`push`](TensorHooks::push) for a scope or to give
/// a checkpoint ([`crate::Checkpoint::saved_tensors_hooks`]).
///
/// `pack` receives a detached alias of the saved tensor (same storage and
/// version counter, no `grad_fn`); `unpack` must return a tensor with the same
/// metadata. A panic in either becomes an error of the op or of the backward
/// that called it. Unpack may run on an autograd worker thread.
///
/// ```
/// use remat_runtime::TensorHooks;
/// use tch::{Kind, Tensor};
/// // Keep saved tensors in half precision, restore them for backward.
/// let half = TensorHooks::new(|t: Tensor| t.to_kind(Kind::Half), |h: &Tensor| h.to_kind(Kind::Float));
/// let x = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
/// let y = {
///     let _scope = half.push();
///     x.sin()
/// };
/// y.sum(Kind::Float).backward();
/// ```
#[derive(Clone)]
pub struct TensorHooks {
    pair: Arc<dyn UserPair>,
    /// Told when a checkpoint whose saves the pair may hold starts to
    /// recompute (docs/semantics.md, rule T9).
    on_recompute: Option<OnRecompute>,
}

type OnRecompute = Arc<dyn Fn(&RecomputeStart) + Send + Sync>;

/// What [`TensorHooks::on_recompute`]'s callback is told: which checkpoint
/// starts to recompute, and the context the pair's capture callback
/// returned when that checkpoint's forward met the pair (its start, or
/// where the pair was pushed inside it), if the pair has one.
///
/// ```
/// use remat_runtime::{autograd::RecomputeStart, TensorHooks};
/// let hooks = TensorHooks::new(|t: tch::Tensor| t, |t: &tch::Tensor| t.shallow_clone())
///     .on_recompute(|start: &RecomputeStart| {
///         let _name: Option<&str> = start.checkpoint.as_deref();
///     });
/// ```
#[derive(Clone)]
pub struct RecomputeStart {
    /// The checkpoint's name (`None` for an unnamed one).
    pub checkpoint: Option<String>,
    /// The pair's captured context for that checkpoint.
    pub context: Option<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for RecomputeStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecomputeStart")
            .field("checkpoint", &self.checkpoint)
            .field("context", &self.context.as_ref().map(|_| ".."))
            .finish()
    }
}

impl TensorHooks {
    /// A pair of closures: `pack` turns a tensor into any value, `unpack`
    /// turns it back.
    ///
    /// ```
    /// use remat_runtime::TensorHooks;
    /// use tch::{Kind, Tensor};
    /// // Keep saved tensors as plain `Vec`s (with their shape) until backward.
    /// let to_vec = TensorHooks::new(
    ///     |t: Tensor| (t.size(), Vec::<f32>::try_from(t.flatten(0, -1)).unwrap()),
    ///     |(size, data): &(Vec<i64>, Vec<f32>)| Tensor::from_slice(data).view(size.as_slice()),
    /// );
    /// let x = Tensor::from_slice(&[0.0f32, 1.0]).set_requires_grad(true);
    /// let y = {
    ///     let _scope = to_vec.push();
    ///     x.sin() // saves `x` through the pair
    /// };
    /// y.sum(Kind::Float).backward();
    /// assert!(x.grad().allclose(&x.cos(), 1e-6, 1e-6, false));
    /// ```
    pub fn new<P, Pack, Unpack>(pack: Pack, unpack: Unpack) -> Self
    where
        P: Send + 'static,
        Pack: Fn(Tensor) -> P + Send + Sync + 'static,
        Unpack: Fn(&P) -> Tensor + Send + Sync + 'static,
    {
        Self::build(pack, unpack, None)
    }

    /// Like [`TensorHooks::new`], with a callback that captures context where
    /// a tensor is produced (even when its pack runs later, at a consumer);
    /// the pack hook reads it from [`current_saved_tensor_info`].
    ///
    /// ```
    /// use remat_runtime::TensorHooks;
    /// let hooks = TensorHooks::with_capture(
    ///     |t: tch::Tensor| t,
    ///     |t: &tch::Tensor| t.shallow_clone(),
    ///     || "layer 3",
    /// );
    /// ```
    pub fn with_capture<P, Pack, Unpack, C>(
        pack: Pack,
        unpack: Unpack,
        capture: impl Fn() -> C + Send + Sync + 'static,
    ) -> Self
    where
        P: Send + 'static,
        Pack: Fn(Tensor) -> P + Send + Sync + 'static,
        Unpack: Fn(&P) -> Tensor + Send + Sync + 'static,
        C: Any + Send + Sync,
    {
        let capture: Capture = Box::new(move || Arc::new(capture()) as Arc<dyn Any + Send + Sync>);
        Self::build(pack, unpack, Some(capture))
    }

    fn build<P, Pack, Unpack>(pack: Pack, unpack: Unpack, capture: Option<Capture>) -> Self
    where
        P: Send + 'static,
        Pack: Fn(Tensor) -> P + Send + Sync + 'static,
        Unpack: Fn(&P) -> Tensor + Send + Sync + 'static,
    {
        TensorHooks {
            pair: Arc::new(ClosurePair {
                pack,
                unpack,
                capture,
                _payload: PhantomData,
            }),
            on_recompute: None,
        }
    }

    /// The pair, told when a checkpoint whose saves it may hold starts to
    /// recompute: once per backward, before any of that checkpoint's saves
    /// is unpacked (its kept saves, which backward can reach before any
    /// recomputation, included) and before its closure runs again; also
    /// when the closure does not run again because nothing is left to
    /// rebuild (docs/semantics.md, rule T9). What an offloader that brings
    /// a checkpoint's saves back in bulk needs: `start.context` is what the
    /// pair's capture callback returned where the checkpoint's forward met
    /// the pair. A panic in `f` fails the backward, as an unpack's does.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, Policy, TensorHooks};
    /// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// use std::sync::Arc;
    ///
    /// let told = Arc::new(AtomicUsize::new(0));
    /// let t = told.clone();
    /// let hooks = TensorHooks::new(|t: tch::Tensor| t, |t: &tch::Tensor| t.shallow_clone())
    ///     .on_recompute(move |_| {
    ///         t.fetch_add(1, SeqCst);
    ///     });
    /// let x = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("block").saved_tensors_hooks(hooks).call(&x, |x| {
    ///     region("exp", Policy::Save).call(&x, |x| x.exp())
    /// });
    /// y.sum(tch::Kind::Float).backward();
    /// assert_eq!(told.load(SeqCst), 1);
    /// ```
    pub fn on_recompute(mut self, f: impl Fn(&RecomputeStart) + Send + Sync + 'static) -> Self {
        self.on_recompute = Some(Arc::new(f));
        self
    }

    /// Whether the pair wants to be told when recomputation starts.
    pub(crate) fn tells(&self) -> bool {
        self.on_recompute.is_some()
    }

    /// The same pair (the same closures, not an equal one).
    pub(crate) fn same(&self, other: &TensorHooks) -> bool {
        Arc::ptr_eq(&self.pair, &other.pair)
    }

    /// Tells the pair that a checkpoint starts to recompute; a panic in the
    /// callback is an error.
    pub(crate) fn recompute_started(&self, start: &RecomputeStart) -> Result<(), String> {
        let Some(f) = &self.on_recompute else {
            return Ok(());
        };
        catch_unwind(AssertUnwindSafe(|| f(start))).map_err(|e| {
            format!(
                "the saved-tensor hooks' recomputation start panicked: {}",
                panic_message(&*e)
            )
        })
    }

    /// Packs `tensor` with `kind` and `context` visible to the pack hook.
    pub(crate) fn pack(
        &self,
        tensor: Tensor,
        kind: SavedTensorKind,
        context: Option<Arc<dyn Any + Send + Sync>>,
        parameter: bool,
    ) -> Result<Payload, String> {
        struct Restore(Option<SavedTensorInfo>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                INFO.with(|i| *i.borrow_mut() = previous);
            }
        }
        let info = SavedTensorInfo {
            kind,
            context,
            parameter,
        };
        let _restore = Restore(INFO.with(|i| i.borrow_mut().replace(info)));
        self.pair.pack(tensor)
    }

    pub(crate) fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String> {
        self.pair.unpack(payload)
    }

    pub(crate) fn capture(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        self.pair.capture()
    }
}
