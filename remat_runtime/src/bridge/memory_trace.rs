//! The planner's trace of memory through one backward
//! (`csrc/memory_trace.cpp`): which node ran, and how many bytes were in
//! use before and after it, so that the profile can tell how much memory
//! each checkpoint's backward needs (docs/planner.md, "Peak during
//! backward").

use super::{check, ffi};
use crate::error::Result;
use std::os::raw::c_int;
use tch::{Device, Tensor};

/// The bridge's code for a device: the C heap for the CPU.
fn code(device: Device) -> c_int {
    match device {
        Device::Cuda(i) => i as c_int,
        _ => -1,
    }
}

/// The autograd sequence number the next node created on this thread will
/// get: nodes made between two reads belong to the code that ran between
/// them.
pub(crate) fn sequence_number() -> i64 {
    // SAFETY: reads a thread-local counter; no arguments.
    unsafe { ffi::remat_sequence_number_peek() }
}

/// Bytes in use on `device` (the C heap for the CPU, the caching
/// allocator for a CUDA device); `None` where that is not known.
pub(crate) fn bytes_in_use(device: Device) -> Option<i64> {
    // SAFETY: reads allocator counters; the code is a plain integer.
    let n = unsafe { ffi::remat_bytes_in_use(code(device)) };
    (n >= 0).then_some(n)
}

/// Runs `loss`'s backward (graph freed) as `torch.autograd.grad` does
/// for every parameter it reaches (not accumulated: `.grad` and
/// accumulator hooks are untouched; each gradient is dropped where a step
/// would add it into `.grad` and free it), sampling the bytes in use on
/// its device before and after every node, as `(sequence number, bytes)`
/// in the order taken; `-1` for a node without a sequence number. The
/// first sample is taken as the backward starts. `None` where the device
/// does not say its bytes in use, or the loss reaches no parameter.
pub(crate) fn traced_backward(loss: &Tensor) -> Result<Option<Vec<(i64, i64)>>> {
    // SAFETY: `loss` is a live tensor borrowed for the call; the hooks the
    // bridge adds live in the graph's nodes and call nothing of Rust.
    check(unsafe { ffi::remat_trace_backward(loss.as_ptr(), code(loss.device())) })?;
    // SAFETY: reads the bridge's own trace; no arguments.
    let n = unsafe { ffi::remat_trace_count() };
    let (mut seqs, mut bytes) = (vec![0i64; n], vec![0i64; n]);
    // SAFETY: both buffers hold `n` writable values; the call writes at
    // most `n` of each.
    let taken = unsafe { ffi::remat_trace_read(seqs.as_mut_ptr(), bytes.as_mut_ptr(), n) };
    if n == 0 || taken != n || bytes.iter().any(|&b| b < 0) {
        return Ok(None);
    }
    Ok(Some(seqs.into_iter().zip(bytes).collect()))
}
