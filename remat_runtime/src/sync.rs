//! Locks that survive a panic.
//!
//! User code (closures, hooks, custom functions) runs while some of remat's
//! locks are held elsewhere on the stack; a panic there poisons them. The data
//! behind remat's locks is plain bookkeeping that stays consistent between
//! statements, so a poisoned lock is taken as it is rather than turning one
//! user panic into a cascade of panics in every later checkpoint.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning (see the module's comment).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
