//! Storage identity, version counters, grad mode and the running graph task.

use super::{check, ffi};
use crate::error::Result;
use std::os::raw::c_void;
use tch::Tensor;

/// Identifies a storage: equal for every view of one tensor's memory.
///
/// The key is the storage's address, so it can be reused once the storage is
/// freed; hold a [`WeakStorage`] to pin it.
///
/// ```
/// use remat_runtime::storage_key;
/// let t = tch::Tensor::zeros([4, 4], tch::kind::FLOAT_CPU);
/// assert_eq!(storage_key(&t), storage_key(&t.transpose(0, 1)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageKey(pub(super) usize);

/// The key of `t`'s storage, or `None` for a tensor without one (undefined,
/// sparse).
///
/// ```
/// use remat_runtime::storage_key;
/// let t = tch::Tensor::zeros([4], tch::kind::FLOAT_CPU);
/// let other = tch::Tensor::zeros([4], tch::kind::FLOAT_CPU);
/// assert!(storage_key(&t).is_some());
/// assert_eq!(storage_key(&t), storage_key(&t.view([2, 2])));
/// assert_ne!(storage_key(&t), storage_key(&other));
/// ```
pub fn storage_key(t: &Tensor) -> Option<StorageKey> {
    // SAFETY: `t` is a live tensor.
    let key = unsafe { ffi::remat_storage_key(t.as_ptr()) };
    (key != 0).then_some(StorageKey(key))
}

/// The byte size of `t`'s whole storage (0 without one).
///
/// ```
/// use remat_runtime::storage_nbytes;
/// let t = tch::Tensor::zeros([4, 4], tch::kind::FLOAT_CPU);
/// assert_eq!(storage_nbytes(&t), 64);
/// assert_eq!(storage_nbytes(&t.select(0, 1)), 64); // a view: still the whole storage
/// ```
pub fn storage_nbytes(t: &Tensor) -> i64 {
    // SAFETY: `t` is a live tensor.
    unsafe { ffi::remat_storage_nbytes(t.as_ptr()) }
}

/// `t`'s offset into its storage, in elements.
///
/// ```
/// use remat_runtime::storage_offset;
/// let t = tch::Tensor::zeros([4, 4], tch::kind::FLOAT_CPU);
/// assert_eq!(storage_offset(&t), 0);
/// assert_eq!(storage_offset(&t.select(0, 2)), 8);
/// ```
pub fn storage_offset(t: &Tensor) -> i64 {
    // SAFETY: `t` is a live tensor.
    unsafe { ffi::remat_storage_offset(t.as_ptr()) }
}

/// A weak reference to a storage: tells whether it is still alive, and keeps
/// its address from being reused while held.
///
/// ```
/// use remat_runtime::WeakStorage;
/// let t = tch::Tensor::zeros([4], tch::kind::FLOAT_CPU);
/// let weak = WeakStorage::new(&t).unwrap();
/// assert!(weak.is_alive());
/// drop(t);
/// assert!(!weak.is_alive());
/// ```
#[derive(Debug)]
pub struct WeakStorage(*mut c_void);

// SAFETY: a `c10::weak_intrusive_ptr` uses atomic reference counts and this
// type only reads it (`expired`, address) or frees it.
unsafe impl Send for WeakStorage {}
// SAFETY: see `Send`; all methods take `&self` and are read-only.
unsafe impl Sync for WeakStorage {}

impl WeakStorage {
    /// A weak handle to `t`'s storage (`None` without one).
    ///
    /// ```
    /// use remat_runtime::WeakStorage;
    /// let t = tch::Tensor::zeros([4], tch::kind::FLOAT_CPU);
    /// assert!(WeakStorage::new(&t).is_some());
    /// ```
    pub fn new(t: &Tensor) -> Option<Self> {
        // SAFETY: `t` is a live tensor; the result is owned by us.
        let raw = unsafe { ffi::remat_storage_weak_new(t.as_ptr()) };
        (!raw.is_null()).then_some(WeakStorage(raw))
    }

    /// Whether some tensor still holds the storage.
    ///
    /// Any view keeps the storage alive:
    ///
    /// ```
    /// use remat_runtime::WeakStorage;
    /// let t = tch::Tensor::zeros([4, 4], tch::kind::FLOAT_CPU);
    /// let row = t.select(0, 1);
    /// let weak = WeakStorage::new(&t).unwrap();
    /// drop(t);
    /// assert!(weak.is_alive());
    /// drop(row);
    /// assert!(!weak.is_alive());
    /// ```
    pub fn is_alive(&self) -> bool {
        // SAFETY: `self.0` is a live weak pointer until `drop`.
        unsafe { ffi::remat_storage_weak_alive(self.0) != 0 }
    }

    /// The key the storage had (stable while this handle exists).
    ///
    /// ```
    /// use remat_runtime::{storage_key, WeakStorage};
    /// let t = tch::Tensor::zeros([4], tch::kind::FLOAT_CPU);
    /// let weak = WeakStorage::new(&t).unwrap();
    /// assert_eq!(Some(weak.key()), storage_key(&t));
    /// ```
    pub fn key(&self) -> StorageKey {
        // The handle is the storage's address, which is what keys are.
        StorageKey(self.0 as usize)
    }
}

impl Drop for WeakStorage {
    fn drop(&mut self) {
        // SAFETY: frees the handle created in `new`, once.
        unsafe { ffi::remat_storage_weak_free(self.0) }
    }
}

/// The version counter of `t`: bumped by every in-place modification of it or
/// of any view sharing its counter.
///
/// ```
/// use remat_runtime::tensor_version;
/// let mut t = tch::Tensor::zeros([2], tch::kind::FLOAT_CPU);
/// let v = tensor_version(&t).unwrap();
/// let _ = t.g_add_(&tch::Tensor::ones([2], tch::kind::FLOAT_CPU));
/// assert_eq!(tensor_version(&t).unwrap(), v + 1);
/// ```
pub fn tensor_version(t: &Tensor) -> Result<u32> {
    let mut v = 0;
    // SAFETY: `t` is a live tensor; `v` is a valid out-pointer.
    check(unsafe { ffi::remat_version(t.as_ptr(), &mut v) })?;
    Ok(v)
}

/// `t` without autograd history, sharing its storage and version counter:
/// what `detach` gives, without a trip through the dispatcher (kept values
/// are made once per `Save` output a consumer asks for).
pub(crate) fn detached_alias(t: &Tensor) -> Result<Tensor> {
    let mut out: *mut torch_sys::C_tensor = std::ptr::null_mut();
    // SAFETY: `t` is a live tensor; on success `out` is an owned tensor.
    check(unsafe { ffi::remat_detached_alias(t.as_ptr(), &mut out) })?;
    // SAFETY: `out` is non-null and owned after a successful call.
    Ok(unsafe { super::take_tensor(out) })
}

/// Whether grad mode is on for this thread.
///
/// ```
/// assert!(remat_runtime::grad_enabled());
/// tch::no_grad(|| assert!(!remat_runtime::grad_enabled()));
/// ```
pub fn grad_enabled() -> bool {
    // SAFETY: reads a thread-local flag.
    unsafe { ffi::remat_grad_mode_enabled() != 0 }
}

/// Sets grad mode for this thread; prefer [`GradModeGuard`].
///
/// ```
/// use remat_runtime::{grad_enabled, set_grad_enabled};
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
/// use remat_runtime::{grad_enabled, GradModeGuard};
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
    /// use remat_runtime::{grad_enabled, GradModeGuard};
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
/// assert_eq!(remat_runtime::graph_task_id(), None);
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
/// assert!(!remat_runtime::graph_task_keeps_graph());
/// ```
pub fn graph_task_keeps_graph() -> bool {
    // SAFETY: reads a thread-local.
    unsafe { ffi::remat_graph_task_keep_graph() != 0 }
}

/// Whether `t` is a leaf of the autograd graph (no `grad_fn`).
///
/// ```
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// assert!(remat_runtime::is_leaf(&x));
/// assert!(!remat_runtime::is_leaf(&(&x * 2)));
/// ```
pub fn is_leaf(t: &Tensor) -> bool {
    // SAFETY: `t` is a live tensor.
    unsafe { ffi::remat_is_leaf(t.as_ptr()) != 0 }
}

/// Bytes of C heap memory in use now, as glibc counts them: the main
/// arena's allocated bytes plus every block it mmapped (large tensors).
/// `None` where the C library does not say (not glibc).
///
/// An independent measure of what a forward keeps alive: libtorch allocates
/// CPU tensors with `malloc`, so the growth across a forward is its live
/// activations and graph. Only the main thread's arena and mmapped blocks
/// are seen: measure on the main thread, with intra-op threads set to one
/// and `mallopt`'s mmap threshold fixed (`MALLOC_MMAP_THRESHOLD_`) so that
/// tensors do not move between the two.
///
/// ```
/// if let Some(before) = remat_runtime::heap_bytes_in_use() {
///     let big = vec![0u8; 1 << 20];
///     assert!(remat_runtime::heap_bytes_in_use().unwrap() >= before + (1 << 20));
///     drop(big);
/// }
/// ```
pub fn heap_bytes_in_use() -> Option<u64> {
    // SAFETY: reads glibc's counters; no arguments.
    let n = unsafe { ffi::remat_heap_bytes_in_use() };
    u64::try_from(n).ok()
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
/// use remat_runtime::backward_with;
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

/// A weak reference to a tensor: [`WeakTensor::upgrade`] gives it back while
/// some handle to it is alive, without keeping it (or its graph) alive.
///
/// ```
/// use remat_runtime::WeakTensor;
/// let t = tch::Tensor::zeros([2], tch::kind::FLOAT_CPU);
/// let weak = WeakTensor::new(&t);
/// assert!(weak.upgrade().is_some());
/// drop(t);
/// assert!(weak.upgrade().is_none());
/// ```
#[derive(Debug)]
pub struct WeakTensor(*mut c_void);

// SAFETY: a `c10::weak_intrusive_ptr<TensorImpl>` uses atomic counts; `upgrade`
// only creates a new strong handle, which is itself `Send`.
unsafe impl Send for WeakTensor {}
// SAFETY: see `Send`; `upgrade` takes `&self` and does not mutate the pointer.
unsafe impl Sync for WeakTensor {}

impl WeakTensor {
    /// A weak reference to `t` (one that never upgrades if `t` is undefined).
    ///
    /// ```
    /// use remat_runtime::{storage_key, WeakTensor};
    /// let t = tch::Tensor::zeros([2], tch::kind::FLOAT_CPU);
    /// let weak = WeakTensor::new(&t);
    /// let back = weak.upgrade().unwrap(); // the same tensor, not a copy
    /// assert_eq!(storage_key(&back), storage_key(&t));
    /// ```
    pub fn new(t: &Tensor) -> Self {
        // SAFETY: `t` is a live tensor; the result (possibly null) is ours.
        WeakTensor(unsafe { ffi::remat_tensor_weak_new(t.as_ptr()) })
    }

    /// The tensor, if some handle to it is still alive.
    ///
    /// Every handle counts, shallow clones included:
    ///
    /// ```
    /// use remat_runtime::WeakTensor;
    /// let t = tch::Tensor::zeros([2], tch::kind::FLOAT_CPU);
    /// let alias = t.shallow_clone();
    /// let weak = WeakTensor::new(&t);
    /// drop(t);
    /// assert!(weak.upgrade().is_some());
    /// drop(alias);
    /// assert!(weak.upgrade().is_none());
    /// ```
    pub fn upgrade(&self) -> Option<Tensor> {
        if self.0.is_null() {
            return None;
        }
        // SAFETY: `self.0` is live until drop; a non-null result is owned.
        let raw = unsafe { ffi::remat_tensor_weak_upgrade(self.0) };
        // SAFETY: a non-null `raw` is a new, owned `at::Tensor*`.
        (!raw.is_null()).then(|| unsafe { super::take_tensor(raw) })
    }
}

impl Drop for WeakTensor {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: frees the handle created in `new`, once.
            unsafe { ffi::remat_tensor_weak_free(self.0) }
        }
    }
}

/// The state of libtorch's default random generator for `device` (CPU, or a
/// CUDA device), as a byte tensor.
///
/// ```
/// use remat_runtime::{rng_state, set_rng_state};
/// let s = rng_state(tch::Device::Cpu).unwrap();
/// let a = tch::Tensor::rand([3], tch::kind::FLOAT_CPU);
/// set_rng_state(tch::Device::Cpu, &s).unwrap();
/// assert!(a.equal(&tch::Tensor::rand([3], tch::kind::FLOAT_CPU)));
/// ```
pub fn rng_state(device: tch::Device) -> Result<Tensor> {
    let mut out: *mut torch_sys::C_tensor = std::ptr::null_mut();
    // SAFETY: on success `out` is an owned tensor.
    unsafe {
        check(ffi::remat_rng_get_state(generator_code(device)?, &mut out))?;
        Ok(super::take_tensor(out))
    }
}

/// Sets the state of `device`'s default generator (from [`rng_state`]).
///
/// ```
/// use remat_runtime::{rng_state, set_rng_state};
/// use tch::{kind::FLOAT_CPU, Device, Tensor};
/// let state = rng_state(Device::Cpu).unwrap();
/// let first = Tensor::rand([3], FLOAT_CPU);
/// set_rng_state(Device::Cpu, &state).unwrap(); // rewind
/// assert!(first.equal(&Tensor::rand([3], FLOAT_CPU)));
/// assert!(set_rng_state(Device::Mps, &state).is_err()); // only CPU and CUDA
/// ```
pub fn set_rng_state(device: tch::Device, state: &Tensor) -> Result<()> {
    // SAFETY: `state` is a live tensor.
    check(unsafe { ffi::remat_rng_set_state(generator_code(device)?, state.as_ptr()) })
}

fn generator_code(device: tch::Device) -> Result<std::os::raw::c_int> {
    match device {
        tch::Device::Cpu => Ok(-1),
        tch::Device::Cuda(i) => Ok(i as std::os::raw::c_int),
        other => Err(crate::Error::torch(format!(
            "no default generator for {other:?}"
        ))),
    }
}
