//! Untracked writes: a scope in which in-place ops bump no version counter
//! and record no autograd history, as libtorch's own kernels run.
//!
//! Invariant: the guard is popped on the thread that pushed it, in reverse
//! order (it is neither `Send` nor `Sync`, and popped on drop).
//!
//! docs/semantics.md, rule H4.

use super::ffi;
use std::os::raw::c_void;

/// While alive, ops on this thread skip autograd and the in-place/view
/// tracking layer: an in-place write bumps no version counter. The runtime
/// runs state-hook restores under it, so that restoring a module's buffers
/// for replay (bookkeeping of remat's own, undone by the end of replay) is
/// invisible to the in-place checks of saved tensors, as the running-stat
/// update inside libtorch's own batch norm is.
pub(crate) struct UntrackedGuard {
    guard: *mut c_void,
}

impl UntrackedGuard {
    /// Enters the scope. If libtorch cannot make the guard (never expected),
    /// writes stay tracked: a restore may then trip an in-place check, which
    /// reports it, rather than silently corrupting anything.
    pub(crate) fn new() -> Self {
        // SAFETY: allocates a guard that sets thread-local dispatch state;
        // it is deleted exactly once, on drop, on this thread.
        UntrackedGuard {
            guard: unsafe { ffi::remat_untracked_push() },
        }
    }
}

impl Drop for UntrackedGuard {
    fn drop(&mut self) {
        if !self.guard.is_null() {
            // SAFETY: `guard` came from `remat_untracked_push` on this thread
            // (the raw pointer keeps the type `!Send`) and is freed once.
            unsafe { ffi::remat_untracked_pop(self.guard) }
        }
    }
}
