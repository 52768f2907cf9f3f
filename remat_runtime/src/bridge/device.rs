//! Device control for the GPU checks: the CUDA caching allocator's byte
//! counters, the thread's current CUDA stream, and libtorch's
//! deterministic-algorithms switch. CPU builds get stubs that return the
//! bridge's "no CUDA diagnostics" error (the switch works everywhere).
//!
//! Invariant: each call is one crossing that reads or sets process or
//! thread state in libtorch; nothing here holds a pointer across calls.

use super::{check, ffi, init};
use crate::error::Result;

/// The allocator's counters of one device, in bytes: allocated now,
/// allocated peak, reserved now, reserved peak.
pub(crate) fn cuda_memory_stats(device: i32) -> Result<[i64; 4]> {
    init();
    let mut out = [0i64; 4];
    // SAFETY: `out` has the four slots the bridge writes.
    check(unsafe { ffi::remat_cuda_memory_stats(device, out.as_mut_ptr()) })?;
    Ok(out)
}

/// Starts the peak counters of `device` again from their current values.
pub(crate) fn cuda_reset_peak(device: i32) -> Result<()> {
    init();
    // SAFETY: plain integer argument.
    check(unsafe { ffi::remat_cuda_reset_peak(device) })
}

/// Makes a pool stream (`side`) or the default stream current on `device`
/// for this thread; returns its id.
pub(crate) fn cuda_use_stream(device: i32, side: bool) -> Result<i64> {
    init();
    let mut id = 0i64;
    // SAFETY: `id` is a live out-parameter.
    check(unsafe { ffi::remat_cuda_use_stream(device, side as _, &mut id) })?;
    Ok(id)
}

/// The id of this thread's current stream on `device`.
pub(crate) fn cuda_current_stream(device: i32) -> Result<i64> {
    init();
    let mut id = 0i64;
    // SAFETY: `id` is a live out-parameter.
    check(unsafe { ffi::remat_cuda_current_stream(device, &mut id) })?;
    Ok(id)
}

/// libtorch's `setDeterministicAlgorithms(enabled, warn_only = false)`.
pub(crate) fn set_deterministic_algorithms(enabled: bool) -> Result<()> {
    init();
    // SAFETY: plain flag.
    check(unsafe { ffi::remat_set_deterministic_algorithms(enabled as _) })
}
