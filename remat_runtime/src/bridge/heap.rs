//! The C heap's bytes in use: an independent measure of what a forward
//! keeps alive on CPU (libtorch allocates CPU tensors with `malloc`).

use super::ffi;

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
