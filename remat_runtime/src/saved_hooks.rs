//! Saved-tensor hooks (PyTorch's `torch.autograd.graph.saved_tensors_hooks`)
//! without Python.

use crate::bridge::{hooks_depth, pop_hooks, push_hooks, HookPair};
use crate::error::panic_message;
use std::any::Any;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tch::Tensor;

/// While alive, every tensor that autograd saves for backward on this thread
/// goes through `pack`, and backward gets it back through `unpack`.
///
/// Hooks nest: the innermost guard wins, and dropping it restores the outer
/// one. A saved tensor is always unpacked by the pair that packed it, even
/// after the guard is gone. With no guard alive autograd behaves as without
/// remat. Hooks are per thread.
///
/// `pack` receives a detached alias of the saved tensor (same storage and
/// version counter, no `grad_fn`); `unpack` must return a tensor with the same
/// metadata. A panic in either becomes an error of the op or of the backward
/// that called it.
///
/// ```
/// use remat_runtime::saved_tensors_hooks;
/// use tch::{Kind, Tensor};
/// let x = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
/// let y = {
///     // Keep saved tensors in half precision, restore them for backward.
///     let _hooks = saved_tensors_hooks(
///         |t: Tensor| t.to_kind(Kind::Half),
///         |h: &Tensor| h.to_kind(Kind::Float),
///     );
///     x.sin()
/// };
/// y.sum(Kind::Float).backward();
/// ```
#[must_use = "the hooks are popped when the guard is dropped"]
pub struct SavedTensorsHooks {
    depth: usize,
    // The hook stack is per thread: pop where we pushed.
    _not_send: PhantomData<*const ()>,
}

struct ClosurePair<P, Pack, Unpack> {
    pack: Pack,
    unpack: Unpack,
    _payload: PhantomData<fn() -> P>,
}

impl<P, Pack, Unpack> HookPair for ClosurePair<P, Pack, Unpack>
where
    P: Send + 'static,
    Pack: Fn(Tensor) -> P + Send + Sync + 'static,
    Unpack: Fn(&P) -> Tensor + Send + Sync + 'static,
{
    fn pack(&self, tensor: Tensor) -> std::result::Result<Box<dyn Any + Send>, String> {
        catch_unwind(AssertUnwindSafe(|| (self.pack)(tensor)))
            .map(|p| Box::new(p) as Box<dyn Any + Send>)
            .map_err(|e| format!("pack hook panicked: {}", panic_message(&*e)))
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> std::result::Result<Tensor, String> {
        let payload = payload
            .downcast_ref::<P>()
            .ok_or("unpack hook got a payload of another pair")?;
        catch_unwind(AssertUnwindSafe(|| (self.unpack)(payload)))
            .map_err(|e| format!("unpack hook panicked: {}", panic_message(&*e)))
    }
}

/// Pushes a pack/unpack pair for the life of the returned guard.
///
/// See [`SavedTensorsHooks`] for the semantics.
///
/// ```
/// let _g = remat_runtime::saved_tensors_hooks(|t: tch::Tensor| t, |t: &tch::Tensor| t.shallow_clone());
/// ```
pub fn saved_tensors_hooks<P, Pack, Unpack>(pack: Pack, unpack: Unpack) -> SavedTensorsHooks
where
    P: Send + 'static,
    Pack: Fn(Tensor) -> P + Send + Sync + 'static,
    Unpack: Fn(&P) -> Tensor + Send + Sync + 'static,
{
    let pair = ClosurePair {
        pack,
        unpack,
        _payload: PhantomData,
    };
    SavedTensorsHooks::push(Some(Arc::new(pair)))
}

impl SavedTensorsHooks {
    /// A level without hooks: saves inside it are kept by autograd as usual,
    /// even if an outer guard has hooks.
    ///
    /// ```
    /// let _none = remat_runtime::SavedTensorsHooks::disabled();
    /// ```
    pub fn disabled() -> Self {
        Self::push(None)
    }

    pub(crate) fn push(pair: Option<Arc<dyn HookPair>>) -> Self {
        let depth = hooks_depth();
        // Pushing only fails when C++ cannot allocate.
        push_hooks(pair).unwrap_or_else(|e| panic!("cannot push saved-tensor hooks: {e}"));
        SavedTensorsHooks {
            depth,
            _not_send: PhantomData,
        }
    }
}

impl Drop for SavedTensorsHooks {
    fn drop(&mut self) {
        // Guards drop in reverse order of creation; one dropped out of order
        // (e.g. moved into a longer-lived place) pops everything above it.
        while hooks_depth() > self.depth {
            if pop_hooks().is_err() {
                break;
            }
        }
    }
}
