//! The CUDA caching allocator, for diagnostics: its out-of-memory observer
//! and a context recorded with each allocation. Only builds with the `cuda`
//! feature have them; elsewhere every call is a clear error.
//!
//! Invariant: the handlers are set once, before the allocator can call
//! them, and never change.

use super::{check, ffi, init};
use crate::error::Result;
use std::ffi::CStr;
use std::os::raw::c_char;
use std::sync::OnceLock;

/// What the allocator tells about a failed allocation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OomEvent {
    pub device: i64,
    pub requested: u64,
    pub device_total: u64,
    pub device_free: u64,
}

static OOM: OnceLock<fn(OomEvent)> = OnceLock::new();
static LABEL: OnceLock<fn() -> String> = OnceLock::new();

pub(super) fn on_oom(event: OomEvent) {
    if let Some(handler) = OOM.get() {
        handler(event)
    }
}

pub(super) fn allocation_label() -> String {
    LABEL.get().map(|label| label()).unwrap_or_default()
}

/// Whether this build has the CUDA diagnostics (the `cuda` feature).
pub(crate) fn cuda_built() -> bool {
    // SAFETY: no arguments.
    unsafe { ffi::remat_cuda_built() != 0 }
}

/// Calls `handler` on every CUDA out-of-memory error, before it propagates.
pub(crate) fn attach_oom_observer(handler: fn(OomEvent)) -> Result<()> {
    init();
    let _ = OOM.set(handler);
    // SAFETY: no arguments; the observer calls back through `CALLBACKS`.
    check(unsafe { ffi::remat_cuda_attach_oom_observer() })
}

/// Records `label()` with every CUDA allocation from now on (or stops).
pub(crate) fn record_allocation_contexts(enabled: bool, label: fn() -> String) -> Result<()> {
    init();
    let _ = LABEL.set(label);
    // SAFETY: plain flag; the recorder calls back through `CALLBACKS`.
    check(unsafe { ffi::remat_cuda_record_contexts(enabled as _) })
}

/// A live block of the CUDA caching allocator.
#[derive(Clone, Debug)]
pub(crate) struct CudaBlock {
    pub address: usize,
    pub size: usize,
    /// What was recorded when it was allocated (empty if nothing).
    pub context: String,
}

/// The allocator's live blocks, by address.
pub(crate) fn cuda_blocks() -> Result<Vec<CudaBlock>> {
    let mut out: *mut c_char = std::ptr::null_mut();
    // SAFETY: on success `out` is a heap string we free below.
    check(unsafe { ffi::remat_cuda_blocks(&mut out) })?;
    if out.is_null() {
        return Ok(Vec::new());
    }
    // SAFETY: a NUL-terminated string from the bridge, copied then freed once.
    let text = unsafe {
        let text = CStr::from_ptr(out).to_string_lossy().into_owned();
        ffi::remat_string_free(out);
        text
    };
    let mut blocks: Vec<CudaBlock> = text
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ' ');
            Some(CudaBlock {
                address: parts.next()?.parse().ok()?,
                size: parts.next()?.parse().ok()?,
                context: parts.next().unwrap_or("").to_string(),
            })
        })
        .collect();
    blocks.sort_by_key(|b| b.address);
    Ok(blocks)
}
