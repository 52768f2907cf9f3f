//! Offload copies on CUDA (docs/semantics.md, rule O5): a CUDA tensor out
//! to pinned host memory and back, on a side stream per device, each copy
//! with the event that says it is done. Only builds with the `cuda` feature
//! (and the CUDA headers) have them; elsewhere every call is an error, and
//! the caller copies on the current stream instead.
//!
//! Invariant: an event is freed exactly once, by its owner's drop.

use super::{check, cuda_built, ffi, take_tensor};
use crate::error::Result;
use std::os::raw::c_void;
use tch::Tensor;

/// A CUDA event recorded after a copy.
pub(crate) struct CopyEvent(*mut c_void);

// SAFETY: a `at::cuda::CUDAEvent` may be waited on from any thread; remat
// only reads it (block) after creation, and frees it once.
unsafe impl Send for CopyEvent {}
// SAFETY: see `Send`: `block` is safe to call from several threads.
unsafe impl Sync for CopyEvent {}

impl Drop for CopyEvent {
    fn drop(&mut self) {
        // SAFETY: frees the event made by the bridge, once.
        unsafe { ffi::remat_cuda_event_free(self.0) }
    }
}

/// Whether side-stream copies are available in this build.
pub(crate) fn side_copies() -> bool {
    cuda_built()
}

/// `src` (a contiguous CUDA tensor) copied to pinned host memory on the
/// side stream, after the work queued so far on the current stream.
pub(crate) fn copy_out(src: &Tensor) -> Result<(Tensor, CopyEvent)> {
    let mut out: *mut torch_sys::C_tensor = std::ptr::null_mut();
    let mut event: *mut c_void = std::ptr::null_mut();
    // SAFETY: `src` is a live tensor; on success both out-pointers are ours.
    check(unsafe { ffi::remat_cuda_copy_out(src.as_ptr(), &mut out, &mut event) })?;
    // SAFETY: non-null and owned after a successful call.
    Ok((unsafe { take_tensor(out) }, CopyEvent(event)))
}

/// `host` copied to CUDA device `device` on its side stream once `after`
/// is done.
pub(crate) fn copy_back(
    host: &Tensor,
    device: usize,
    after: &CopyEvent,
) -> Result<(Tensor, CopyEvent)> {
    let mut out: *mut torch_sys::C_tensor = std::ptr::null_mut();
    let mut event: *mut c_void = std::ptr::null_mut();
    // SAFETY: `host` is a live tensor and `after` a live event; on success
    // both out-pointers are ours.
    check(unsafe {
        ffi::remat_cuda_copy_back(host.as_ptr(), device as _, after.0, &mut out, &mut event)
    })?;
    // SAFETY: non-null and owned after a successful call.
    Ok((unsafe { take_tensor(out) }, CopyEvent(event)))
}

/// The current stream waits for `event` before it uses `t`.
pub(crate) fn use_after(t: &Tensor, event: &CopyEvent) -> Result<()> {
    // SAFETY: `t` is a live tensor and `event` a live event.
    check(unsafe { ffi::remat_cuda_use(t.as_ptr(), event.0) })
}
