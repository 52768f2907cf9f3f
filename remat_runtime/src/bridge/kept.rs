//! A `Save` output kept for replay as its storage and version counter,
//! without a tensor of its own.
//!
//! A detached alias (`detach()`'s result) is a whole `TensorImpl`: made when
//! a consumer asks for the output on the forward, destroyed after backward,
//! for every asked output, about half of what a region costs. The output's
//! layout is recorded anyway (rule S10), so what must stay alive is only
//! its memory and the counter that tells whether anything changed it in
//! place (rule P2): two counted references, and the alias is made when a
//! replay serves the value.
//!
//! Invariant: a [`KeptStorage`] is made only from a tensor that
//! [`KeptStorage::tensor`] gives back exactly, with its recorded layout (a
//! dense strided tensor whose dispatch keys are its backend's, autograd's
//! and autocast's only, neither an inference tensor nor quantized);
//! anything else stays a detached alias.

use super::meta::TensorMeta;
use super::storage::WeakTensor;
use super::{check, ffi};
use crate::error::Result;
use std::os::raw::c_void;
use std::ptr::NonNull;
use tch::Tensor;

/// A value's storage and version counter, counted references both.
pub(crate) struct KeptStorage(NonNull<c_void>);

// SAFETY: the C++ object holds a `c10::Storage` and a `c10::VariableVersion`,
// both reference-counted atomically; nothing mutates it after creation.
unsafe impl Send for KeptStorage {}
// SAFETY: see `Send`: every method reads only.
unsafe impl Sync for KeptStorage {}

/// What a weak output handle gives when it is asked for.
pub(crate) enum FromWeak {
    /// The output is gone.
    Gone,
    /// The output is alive and was kept, with its version now.
    Kept(KeptStorage, u32),
    /// The output is alive but cannot be rebuilt from its storage: keep it
    /// as a tensor.
    Live(Tensor),
}

impl KeptStorage {
    /// `t`'s storage and version counter, with its version now; `None`
    /// when `t` cannot be rebuilt from them.
    pub(crate) fn of(t: &Tensor) -> Result<Option<(KeptStorage, u32)>> {
        let (mut out, mut version) = (std::ptr::null_mut(), 0);
        // SAFETY: `t` is a live tensor; on success `out` is null or owned.
        check(unsafe { ffi::remat_kept_new(t.as_ptr(), &mut out, &mut version) })?;
        Ok(NonNull::new(out).map(|p| (KeptStorage(p), version)))
    }

    /// The output `weak` refers to, kept if it is alive, in one crossing
    /// (no handle to the output is made when it can be kept).
    pub(crate) fn of_weak(weak: &WeakTensor) -> Result<FromWeak> {
        let Some(raw) = weak.raw() else {
            return Ok(FromWeak::Gone);
        };
        let (mut out, mut version, mut live) = (std::ptr::null_mut(), 0, std::ptr::null_mut());
        // SAFETY: `raw` is the weak handle `weak` owns, live while it is;
        // on success `out` and `live` are null or owned, never both set.
        check(unsafe { ffi::remat_kept_from_weak(raw, &mut out, &mut version, &mut live) })?;
        Ok(match (NonNull::new(out), live.is_null()) {
            (Some(p), _) => FromWeak::Kept(KeptStorage(p), version),
            // SAFETY: a non-null `live` is a new, owned `at::Tensor*`.
            (None, false) => FromWeak::Live(unsafe { super::take_tensor(live) }),
            (None, true) => FromWeak::Gone,
        })
    }

    /// The counter's value now.
    pub(crate) fn version(&self) -> u32 {
        // SAFETY: `self.0` is live until drop.
        unsafe { ffi::remat_kept_version(self.0.as_ptr()) }
    }

    /// The value as a tensor without history, with `meta`'s layout and
    /// dtype (the output's, recorded when it was made), sharing the
    /// counter.
    pub(crate) fn tensor(&self, meta: &TensorMeta) -> Result<Tensor> {
        let (sizes, strides) = (meta.sizes(), meta.strides());
        let mut out = std::ptr::null_mut();
        // SAFETY: `self.0` is live; `sizes` and `strides` hold `ndim`
        // elements each; on success `out` is an owned tensor.
        check(unsafe {
            ffi::remat_kept_tensor(
                self.0.as_ptr(),
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

    /// A second handle to the same storage and counter.
    pub(crate) fn try_clone(&self) -> Result<KeptStorage> {
        let mut out = std::ptr::null_mut();
        // SAFETY: `self.0` is live; on success `out` is owned.
        check(unsafe { ffi::remat_kept_clone(self.0.as_ptr(), &mut out) })?;
        NonNull::new(out)
            .map(KeptStorage)
            .ok_or_else(|| crate::error::Error::Internal("a kept value's copy is null".into()))
    }
}

impl Drop for KeptStorage {
    fn drop(&mut self) {
        // SAFETY: frees the object made by `of`, `of_weak` or `try_clone`, once.
        unsafe { ffi::remat_kept_free(self.0.as_ptr()) }
    }
}
