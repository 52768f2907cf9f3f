//! The stop of a recomputation without unwinding (`csrc/early_stop.cpp`):
//! armed around the closure of a recomputation that may stop, it turns the
//! op whose save completes the rebuild, and every later op computed from a
//! placeholder, into ops that compute nothing (docs/semantics.md, rule
//! C17).

use super::{check, ffi, take_tensor};
use crate::error::Result;
use std::ffi::{c_int, c_void};
use tch::Tensor;
use torch_sys::C_tensor;

/// Whether this process can stop a recomputation early: libtorch took the
/// dispatcher fallback the stop needs (once, on the first call).
pub(crate) fn stop_available() -> bool {
    super::init();
    // SAFETY: no arguments; registers the fallback once (thread-safe static
    // initialisation) and never throws across the boundary.
    unsafe { ffi::remat_stop_available() != 0 }
}

/// The stop armed on this thread for one recomputation; dropping it puts
/// back the thread's previous stop state (also on a panic's unwind).
pub(crate) struct StopArmed {
    previous: *mut c_void,
}

impl StopArmed {
    /// Arms the stop: `read` is what reading a tensor computed after the
    /// stop says, `no_meta` what an op without a meta kernel says (`{op}`
    /// is its name); `active`: ops pass through the fallback from now on,
    /// else from [`stop_activate`]. `None` when the stop is not
    /// available (the bridge then arms nothing).
    pub(crate) fn arm(read: &str, no_meta: &str, active: bool) -> Option<StopArmed> {
        // SAFETY: both strings are borrowed for the call only (C++ copies
        // them); the returned state is owned here until `Drop`.
        let previous = unsafe {
            ffi::remat_stop_arm(
                read.as_ptr().cast(),
                read.len(),
                no_meta.as_ptr().cast(),
                no_meta.len(),
                c_int::from(active),
            )
        };
        (!previous.is_null()).then_some(StopArmed { previous })
    }
}

/// From now on every op of the armed recomputation on this thread passes
/// through the stop's fallback (nothing if none is armed).
pub(crate) fn stop_activate() {
    // SAFETY: no arguments; touches only this thread's stop state.
    unsafe { ffi::remat_stop_activate() }
}

impl Drop for StopArmed {
    fn drop(&mut self) {
        // SAFETY: `previous` came from `remat_stop_arm` on this thread (the
        // type is neither Send nor Sync: it holds a raw pointer) and is
        // handed back exactly once.
        unsafe { ffi::remat_stop_disarm(self.previous) }
    }
}

/// The armed recomputation on this thread has rebuilt everything backward
/// reads: from now on it runs dry (nothing if none is armed). With
/// `end_op`, whether an op is in progress that failing the current save
/// would end (and run dry); without, or when none is, `false`, and the
/// running op's results are made dry when it returns.
pub(crate) fn stop_now(end_op: bool) -> bool {
    // SAFETY: plain data in; touches only this thread's stop state.
    unsafe { ffi::remat_stop_now(c_int::from(end_op)) != 0 }
}

/// Whether this thread's recomputation has stopped: what it computes from
/// here on may be dry.
pub(crate) fn stop_is_dry() -> bool {
    // SAFETY: no arguments; reads this thread's stop state.
    unsafe { ffi::remat_stop_is_dry() != 0 }
}

/// A placeholder of `t`'s layout when this thread's recomputation has
/// stopped (what a closure called in its tail computes from), else `None`.
pub(crate) fn dry_copy(t: &Tensor) -> Result<Option<Tensor>> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: `t` is a live tensor borrowed for the call; on success `out`
    // is null or an owned tensor.
    unsafe {
        check(ffi::remat_stop_dry_copy(t.as_ptr(), &mut out))?;
        Ok((!out.is_null()).then(|| take_tensor(out)))
    }
}

/// Runs `f` and returns, with its result, the names of the ops that ran
/// dry on this thread meanwhile, in order (`aten::name` or
/// `aten::name.overload`): what the recomputations `f` triggered did not
/// compute after their stop (docs/semantics.md, rule C17). On the CPU a
/// backward recomputes on the thread that calls it, so wrap the backward.
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::dry_ops};
/// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// // `sin` saves its input, the last save; three elements are too few to
/// // be worth ending `sin`, so it computes and what follows runs dry.
/// let y = checkpoint("block").call(&x, |x| x.sin() * 2.0 + 1.0);
/// let ((), dry) = dry_ops(|| y.sum(tch::Kind::Float).backward());
/// assert_eq!(dry, ["aten::mul.Scalar", "aten::add.Scalar"]);
/// ```
pub fn dry_ops<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    /// Ends the log also when `f` panics.
    struct Log;
    impl Log {
        fn end(self) -> Vec<String> {
            std::mem::forget(self);
            end_log()
        }
    }
    impl Drop for Log {
        fn drop(&mut self) {
            end_log();
        }
    }
    super::init();
    // SAFETY: no arguments; starts this thread's log.
    unsafe { ffi::remat_dry_log_begin() };
    let log = Log;
    let out = f();
    (out, log.end())
}

fn end_log() -> Vec<String> {
    // SAFETY: returns a NUL-terminated heap string (or null when out of
    // memory), copied here and freed once.
    unsafe {
        let text = ffi::remat_dry_log_end();
        if text.is_null() {
            return Vec::new();
        }
        let names = std::ffi::CStr::from_ptr(text)
            .to_string_lossy()
            .lines()
            .map(str::to_string)
            .collect();
        ffi::remat_string_free(text);
        names
    }
}
