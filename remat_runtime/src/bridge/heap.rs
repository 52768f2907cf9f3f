//! The C heap's bytes in use: an independent measure of what a forward
//! keeps alive on CPU (libtorch allocates CPU tensors with `malloc`), and
//! of the peak during a backward, sampled by hooks the bridge puts on every
//! node of the graph.

use super::ffi;

/// Bytes of C heap memory in use now, as glibc counts them (`mallinfo2`):
/// the allocated bytes of every arena plus every mmapped block (large
/// tensors). `None` where the C library does not say (not glibc).
///
/// An independent measure of what a forward keeps alive: libtorch allocates
/// CPU tensors with `malloc`, so the growth across a forward is its live
/// activations and graph. Every thread's allocations count: measure while
/// no other thread of the process allocates (tests that measure run one at
/// a time), with intra-op threads set to one.
///
/// ```
/// if let Some(before) = remat_runtime::diagnostics::heap_bytes_in_use() {
///     let big = vec![0u8; 1 << 20];
///     assert!(remat_runtime::diagnostics::heap_bytes_in_use().unwrap() >= before + (1 << 20));
///     drop(big);
/// }
/// ```
pub fn heap_bytes_in_use() -> Option<u64> {
    // SAFETY: reads glibc's counters; no arguments.
    let n = unsafe { ffi::remat_heap_bytes_in_use() };
    u64::try_from(n).ok()
}

/// Runs `loss`'s backward (as [`backward_with`](super::backward_with)`(loss,
/// false)`) and returns the most C heap bytes in use it saw: before the
/// backward starts, and before and after every node of `loss`'s graph runs.
/// A checkpoint's replay runs inside the node whose unpack starts it, so
/// what the replay rebuilt is seen at that node's boundary; what a single
/// op allocates and frees inside itself is not (a lower bound of the true
/// peak, exact at node boundaries). `Ok(None)` where the C library does not
/// say (not glibc).
///
/// An independent measure of a backward's peak: glibc's counters, not
/// remat's records, under the conditions of [`heap_bytes_in_use`]. The
/// maximum is one per process: measure one backward at a time.
///
/// ```
/// let w = tch::Tensor::ones([256, 256], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let loss = w.sin().sum(tch::Kind::Float);
/// let before = remat_runtime::diagnostics::heap_bytes_in_use();
/// let peak = remat_runtime::diagnostics::backward_heap_peak(&loss).unwrap();
/// if let (Some(before), Some(peak)) = (before, peak) {
///     // The gradient of `w` (256 KiB) was allocated during backward.
///     assert!(peak >= before + (256 << 10));
/// }
/// ```
pub fn backward_heap_peak(loss: &tch::Tensor) -> crate::error::Result<Option<u64>> {
    let root = [loss.as_ptr()];
    // SAFETY: `root` holds one live tensor borrowed for the call; the hooks
    // the bridge adds live in the graph's nodes and call nothing of Rust.
    super::check(unsafe { ffi::remat_heap_watch(root.as_ptr(), root.len()) })?;
    // SAFETY: reads and writes the bridge's own counter; no arguments.
    unsafe { ffi::remat_heap_peak_reset() };
    super::backward_with(loss, false)?;
    // SAFETY: reads the bridge's own counter; no arguments.
    let peak = unsafe { ffi::remat_heap_peak() };
    Ok(u64::try_from(peak).ok())
}
