//! Storage identity, weak references to storages and tensors, version
//! counters, and detached aliases.

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
/// use remat_runtime::storage::storage_key;
/// let t = tch::Tensor::zeros([4, 4], tch::kind::FLOAT_CPU);
/// assert_eq!(storage_key(&t), storage_key(&t.transpose(0, 1)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageKey(pub(super) usize);

/// The key of `t`'s storage, or `None` for a tensor without one (undefined,
/// sparse).
///
/// ```
/// use remat_runtime::storage::storage_key;
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
/// use remat_runtime::storage::storage_nbytes;
/// let t = tch::Tensor::zeros([4, 4], tch::kind::FLOAT_CPU);
/// assert_eq!(storage_nbytes(&t), 64);
/// assert_eq!(storage_nbytes(&t.select(0, 1)), 64); // a view: still the whole storage
/// ```
pub fn storage_nbytes(t: &Tensor) -> i64 {
    // SAFETY: `t` is a live tensor.
    unsafe { ffi::remat_storage_nbytes(t.as_ptr()) }
}

/// `t`'s offset into its storage, in elements, in one crossing (tch's
/// `Tensor::storage_offset` goes through the dispatcher; a `Save` region
/// asks once per saved input view).
pub(crate) fn storage_offset(t: &Tensor) -> i64 {
    // SAFETY: `t` is a live tensor.
    unsafe { ffi::remat_storage_offset(t.as_ptr()) }
}

/// A weak reference to a storage: tells whether it is still alive, and keeps
/// its address from being reused while held.
///
/// ```
/// use remat_runtime::storage::WeakStorage;
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
    /// use remat_runtime::storage::WeakStorage;
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
    /// use remat_runtime::storage::WeakStorage;
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
    /// use remat_runtime::{storage::storage_key, storage::WeakStorage};
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
/// use remat_runtime::storage::tensor_version;
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

/// The tensor that `meta` describes, rebuilt over `of`'s storage (which
/// must be the one `meta` was taken from) and sharing `of`'s version
/// counter, without autograd history: a value whose handles are all gone,
/// brought back from a view of it that is still alive.
pub(crate) fn alias_with_layout(of: &Tensor, meta: &super::TensorMeta) -> Result<Tensor> {
    let (sizes, strides) = (meta.sizes(), meta.strides());
    let mut out: *mut torch_sys::C_tensor = std::ptr::null_mut();
    // SAFETY: `of` is a live tensor, `sizes` and `strides` hold `ndim`
    // values each; on success `out` is an owned tensor.
    check(unsafe {
        ffi::remat_alias_with_layout(
            of.as_ptr(),
            sizes.as_ptr(),
            strides.as_ptr(),
            sizes.len(),
            meta.storage_offset,
            meta.scalar_type,
            &mut out,
        )
    })?;
    // SAFETY: `out` is non-null and owned after a successful call.
    Ok(unsafe { super::take_tensor(out) })
}

/// A weak reference to a tensor: [`WeakTensor::upgrade`] gives it back while
/// some handle to it is alive, without keeping it (or its graph) alive.
///
/// ```
/// use remat_runtime::storage::WeakTensor;
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
    /// use remat_runtime::{storage::storage_key, storage::WeakTensor};
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
    /// use remat_runtime::storage::WeakTensor;
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

impl WeakTensor {
    /// The weak handle itself, for a bridge call that upgrades it (`None`
    /// for the undefined tensor's).
    pub(super) fn raw(&self) -> Option<*const c_void> {
        (!self.0.is_null()).then_some(self.0 as *const c_void)
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

/// A tensor's version counter (shared by its views), held without the
/// tensor or its storage: how a save that was copied elsewhere still sees
/// later in-place changes of the original.
pub(crate) struct VersionCounter(*mut c_void);

// SAFETY: `c10::VariableVersion` holds an intrusive pointer with atomic
// counts, and its version is an atomic read.
unsafe impl Send for VersionCounter {}
// SAFETY: see `Send`; `get` only reads.
unsafe impl Sync for VersionCounter {}

impl VersionCounter {
    pub(crate) fn of(t: &Tensor) -> Result<Self> {
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: `t` is a live tensor; on success `out` is ours to free.
        check(unsafe { ffi::remat_version_counter_new(t.as_ptr(), &mut out) })?;
        Ok(VersionCounter(out))
    }

    pub(crate) fn get(&self) -> u32 {
        // SAFETY: `self.0` is a live counter until drop.
        unsafe { ffi::remat_version_counter_get(self.0) }
    }
}

impl Drop for VersionCounter {
    fn drop(&mut self) {
        // SAFETY: frees the counter made in `of`, once.
        unsafe { ffi::remat_version_counter_free(self.0) }
    }
}

/// The address of `t`'s storage data (0 without one): where a kept save's
/// allocation is, for the reports and the CUDA allocator's history.
pub(crate) fn storage_data(t: &Tensor) -> usize {
    // SAFETY: `t` is a live tensor.
    unsafe { ffi::remat_storage_data(t.as_ptr()) }
}
