//! Saved-tensor hooks (PyTorch's `torch.autograd.graph.saved_tensors_hooks`)
//! without Python, and how they meet checkpoints.
//!
//! Outside a checkpoint a pair applies to every tensor autograd saves. Inside
//! one, what autograd saves in bare code and `Recompute` regions is the
//! checkpoint's own business (it becomes a holder); the pair applies to the
//! checkpoint's inputs, to the saves of `Save` regions and to kept
//! `Save` outputs, and [`current_saved_tensor_info`] tells the pack hook which.
//!
//! Invariant: `LEVELS` mirrors libtorch's per-thread hook stack level for
//! level; every push is popped by its guard's drop.
//!
//! docs/semantics.md rules kept here: T1 (scopes, nesting, `disabled`), T2
//! (outside checkpoints), T3 (what a pair packs inside one), T4 (a pair
//! pushed inside a checkpoint's forward applies to its `Save` regions).

use crate::bridge::{hooks_depth, pop_hooks, push_hooks, HookPair, Payload, SaveSite};
use crate::checkpointing::frame;
use crate::checkpointing::tensor_hooks::{SavedTensorKind, TensorHooks};
use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Arc;
use tch::Tensor;

#[cfg(doc)]
use crate::checkpointing::tensor_hooks::current_saved_tensor_info;

thread_local! {
    /// Mirrors the native hook stack: which levels are user pairs.
    static LEVELS: RefCell<Vec<Option<TensorHooks>>> = const { RefCell::new(Vec::new()) };
}

impl TensorHooks {
    /// Applies the pair until the returned guard is dropped.
    ///
    /// Outside a checkpoint it applies to every tensor autograd saves on this
    /// thread. Inside a checkpoint's forward it applies to the saves of `Save`
    /// regions and to the `Save` outputs kept for replay (what else is saved
    /// there belongs to the checkpoint).
    ///
    /// ```
    /// use remat_runtime::TensorHooks;
    /// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// use std::sync::Arc;
    /// use tch::Tensor;
    ///
    /// let packed = Arc::new(AtomicUsize::new(0));
    /// let count = packed.clone();
    /// let hooks = TensorHooks::new(
    ///     move |t: Tensor| {
    ///         count.fetch_add(1, SeqCst);
    ///         t
    ///     },
    ///     |t: &Tensor| t.shallow_clone(),
    /// );
    /// let x = Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// {
    ///     let _scope = hooks.push();
    ///     let _a = x.sin(); // packed
    /// }
    /// let _b = x.cos(); // the guard is gone: kept by autograd as usual
    /// assert_eq!(packed.load(SeqCst), 1);
    /// ```
    pub fn push(&self) -> SavedTensorsHooks {
        match frame::set_user_hooks(Some(self.clone())) {
            Some(restore) => SavedTensorsHooks {
                inner: Inner::Frame(Some(restore)),
                _not_send: PhantomData,
            },
            None => SavedTensorsHooks::push_native(
                Some(Arc::new(Native {
                    hooks: self.clone(),
                    kind: SavedTensorKind::Backward,
                })),
                Some(self.clone()),
            ),
        }
    }

    /// The user pair on top of this thread's native hook stack, if the top
    /// is one (not a checkpoint's own hook, not a disabled level).
    pub(crate) fn ambient() -> Option<TensorHooks> {
        LEVELS.with(|l| l.borrow().last().cloned().flatten())
    }

    /// Pushes this pair natively with `kind` (for checkpoint inputs).
    pub(crate) fn push_as(&self, kind: SavedTensorKind) -> SavedTensorsHooks {
        SavedTensorsHooks::push_native(
            Some(Arc::new(Native {
                hooks: self.clone(),
                kind,
            })),
            Some(self.clone()),
        )
    }
}

/// A user pair installed as libtorch's default hooks.
struct Native {
    hooks: TensorHooks,
    kind: SavedTensorKind,
}

impl HookPair for Native {
    // Native pairs pack checkpoint inputs and saves outside checkpoints:
    // neither is something a checkpoint keeps, so (as in the reference) the
    // capture callback does not run and the context is `None`.
    fn pack(&self, tensor: Tensor, site: SaveSite) -> Result<Payload, String> {
        self.hooks.pack(tensor, self.kind, None, site.param)
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String> {
        self.hooks.unpack(payload)
    }
}

/// Applies a pair for a scope; see [`TensorHooks`] for the semantics.
///
/// ```
/// use remat_runtime::saved_tensors_hooks;
/// use tch::{Kind, Tensor};
/// let x = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
/// let y = {
///     let _hooks = saved_tensors_hooks(|t: Tensor| t.to_kind(Kind::Half), |h: &Tensor| h.to_kind(Kind::Float));
///     x.sin()
/// };
/// y.sum(Kind::Float).backward();
/// ```
pub fn saved_tensors_hooks<P, Pack, Unpack>(pack: Pack, unpack: Unpack) -> SavedTensorsHooks
where
    P: Send + 'static,
    Pack: Fn(Tensor) -> P + Send + Sync + 'static,
    Unpack: Fn(&P) -> Tensor + Send + Sync + 'static,
{
    TensorHooks::new(pack, unpack).push()
}

/// While alive, a pair of saved-tensor hooks applies (see [`TensorHooks`]).
///
/// Hooks nest: the innermost guard wins, and dropping it restores the outer
/// one. A saved tensor is always unpacked by the pair that packed it, even
/// after the guard is gone. With no guard alive autograd behaves as without
/// remat. Hooks are per thread.
///
/// ```
/// use remat_runtime::{SavedTensorsHooks, TensorHooks};
/// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
/// use std::sync::Arc;
/// use tch::Tensor;
///
/// fn counting(n: &Arc<AtomicUsize>) -> TensorHooks {
///     let n = n.clone();
///     TensorHooks::new(
///         move |t: Tensor| {
///             n.fetch_add(1, SeqCst);
///             t
///         },
///         |t: &Tensor| t.shallow_clone(),
///     )
/// }
///
/// let (outer, inner) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
/// let x = Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let _outer = counting(&outer).push();
/// {
///     let _inner: SavedTensorsHooks = counting(&inner).push();
///     let _a = x.sin(); // the innermost pair wins
/// }
/// let _b = x.sin(); // the outer pair again
/// {
///     let _none = SavedTensorsHooks::disabled();
///     let _c = x.sin(); // no pair
/// }
/// assert_eq!((outer.load(SeqCst), inner.load(SeqCst)), (1, 1));
/// ```
#[must_use = "the hooks are popped when the guard is dropped"]
pub struct SavedTensorsHooks {
    inner: Inner,
    // The hook stack is per thread: pop where we pushed.
    _not_send: PhantomData<*const ()>,
}

enum Inner {
    Native { depth: usize },
    Frame(Option<frame::UserHooksRestore>),
}

impl SavedTensorsHooks {
    /// A level without hooks: saves inside it are kept by autograd as usual,
    /// even if an outer guard has hooks.
    ///
    /// ```
    /// let _none = remat_runtime::SavedTensorsHooks::disabled();
    /// ```
    pub fn disabled() -> Self {
        Self::push_native(None, None)
    }

    /// Pushes one of remat's own pairs (a level that is no user pair).
    pub(crate) fn push(pair: Option<Arc<dyn HookPair>>) -> Self {
        Self::push_native(pair, None)
    }

    fn push_native(pair: Option<Arc<dyn HookPair>>, user: Option<TensorHooks>) -> Self {
        let depth = hooks_depth();
        // Pushing only fails when C++ cannot allocate.
        push_hooks(pair).unwrap_or_else(|e| panic!("cannot push saved-tensor hooks: {e}"));
        LEVELS.with(|l| l.borrow_mut().push(user));
        SavedTensorsHooks {
            inner: Inner::Native { depth },
            _not_send: PhantomData,
        }
    }
}

impl Drop for SavedTensorsHooks {
    fn drop(&mut self) {
        match &mut self.inner {
            Inner::Native { depth } => {
                // Guards drop in reverse order of creation; one dropped out of
                // order pops everything above it.
                while hooks_depth() > *depth {
                    if pop_hooks().is_err() {
                        break;
                    }
                }
                let depth = *depth;
                LEVELS.with(|l| l.borrow_mut().truncate(depth));
            }
            Inner::Frame(restore) => {
                if let Some(r) = restore.take() {
                    r.restore();
                }
            }
        }
    }
}
