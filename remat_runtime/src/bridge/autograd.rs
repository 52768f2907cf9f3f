//! Autograd state and entry points tch does not expose: grad mode with a
//! guard that restores it on panics, the running graph task, leaf and
//! parameter tests, and a backward that can retain the graph.

use super::{check, ffi};
use crate::error::Result;
use tch::Tensor;

/// Whether grad mode is on for this thread.
///
/// ```
/// assert!(remat_runtime::autograd::grad_enabled());
/// tch::no_grad(|| assert!(!remat_runtime::autograd::grad_enabled()));
/// ```
pub fn grad_enabled() -> bool {
    // SAFETY: reads a thread-local flag.
    unsafe { ffi::remat_grad_mode_enabled() != 0 }
}

/// Sets grad mode for this thread; prefer [`GradModeGuard`].
///
/// ```
/// use remat_runtime::{autograd::grad_enabled, autograd::set_grad_enabled};
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// set_grad_enabled(false);
/// assert!(!grad_enabled());
/// assert!(!(&x * 2).requires_grad()); // no graph is recorded
/// set_grad_enabled(true);
/// assert!((&x * 2).requires_grad());
/// ```
pub fn set_grad_enabled(enabled: bool) {
    // SAFETY: writes a thread-local flag.
    unsafe { ffi::remat_grad_mode_set(enabled as _) }
}

/// Sets grad mode for a scope and restores the previous mode on drop.
///
/// ```
/// use remat_runtime::{autograd::grad_enabled, autograd::GradModeGuard};
/// tch::no_grad(|| {
///     let _g = GradModeGuard::new(true);
///     assert!(grad_enabled());
/// });
/// ```
#[derive(Debug)]
pub struct GradModeGuard {
    previous: bool,
    // Grad mode is per thread: the guard must be dropped where it was made.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl GradModeGuard {
    /// Sets grad mode to `enabled` until the guard is dropped.
    ///
    /// ```
    /// use remat_runtime::{autograd::grad_enabled, autograd::GradModeGuard};
    /// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// {
    ///     let _no_grad = GradModeGuard::new(false);
    ///     assert!(!(&x * 2).requires_grad());
    /// }
    /// assert!(grad_enabled()); // restored on drop
    /// ```
    pub fn new(enabled: bool) -> Self {
        let previous = grad_enabled();
        set_grad_enabled(enabled);
        GradModeGuard {
            previous,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        set_grad_enabled(self.previous);
    }
}

/// Runs `f` with grad mode off and restores the previous mode however `f`
/// ends, panics included (`tch::no_grad` restores it only on return).
pub(crate) fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = GradModeGuard::new(false);
    f()
}

/// The id of the backward (graph task) running on this thread, if any.
///
/// ```
/// assert_eq!(remat_runtime::autograd::graph_task_id(), None);
/// ```
pub fn graph_task_id() -> Option<i32> {
    // SAFETY: reads a thread-local.
    let id = unsafe { ffi::remat_graph_task_id() };
    (id >= 0).then_some(id)
}

/// Whether the backward running on this thread keeps its graph
/// (`retain_graph`); `false` outside backward.
///
/// ```
/// assert!(!remat_runtime::autograd::graph_task_keeps_graph());
/// ```
pub fn graph_task_keeps_graph() -> bool {
    // SAFETY: reads a thread-local.
    unsafe { ffi::remat_graph_task_keep_graph() != 0 }
}

/// Whether `t` is a parameter (a leaf that requires grad) or a view of one:
/// what reports leave out of activation memory.
pub(crate) fn is_parameter(t: &Tensor) -> bool {
    // SAFETY: `t` is a live tensor.
    unsafe { ffi::remat_is_parameter(t.as_ptr()) != 0 }
}

/// Runs backward from `loss` (accumulating into the leaves' `grad`), keeping
/// the graph for another backward when `retain_graph` is set: what tch's
/// `backward` cannot do.
///
/// ```
/// use remat_runtime::autograd::backward_with;
/// let x = tch::Tensor::from_slice(&[2.0f32]).set_requires_grad(true);
/// let y = (&x * &x).sum(tch::Kind::Float);
/// backward_with(&y, true).unwrap();
/// backward_with(&y, false).unwrap();
/// assert_eq!(f32::try_from(x.grad()).unwrap(), 8.0);
/// ```
pub fn backward_with(loss: &Tensor, retain_graph: bool) -> Result<()> {
    // SAFETY: `loss` is a live tensor.
    check(unsafe { ffi::remat_backward(loss.as_ptr(), retain_graph as _) })
}
