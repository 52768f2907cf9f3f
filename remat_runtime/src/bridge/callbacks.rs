//! The Rust functions that C++ calls. Each catches panics: a Rust panic must
//! never unwind into libtorch. Failures are reported through `remat_error_set`
//! and a non-zero (or null) return, which C++ turns into an exception that
//! autograd reports as an `Err` from `backward`.

use super::ffi::{self, Callbacks};
use super::hook_stack::{HookPair, NodeId, Payload, SaveSite};
use super::node::{NodeCtx, SavedAccess};
use super::{borrow_tensor, give_tensor, take_tensor};
use crate::error::panic_message;
use crate::sync::lock;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use torch_sys::C_tensor;

pub(super) static CALLBACKS: Callbacks = Callbacks {
    node_apply,
    node_release,
    node_drop,
    hooks_pack,
    hooks_unpack,
    payload_drop,
    hooks_drop,
    cuda_oom,
    cuda_alloc_context,
};

fn set_error(err: *mut c_void, msg: &str) {
    // SAFETY: `err` is the `std::string*` that C++ passed to the callback; the
    // bridge copies `len` bytes from `msg` before we return.
    unsafe { ffi::remat_error_set(err, msg.as_ptr().cast(), msg.len()) }
}

/// Runs `f`, converting an `Err` or a panic into a reported error.
fn run<T>(err: *mut c_void, what: &str, f: impl FnOnce() -> Result<T, String>) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Some(value),
        Ok(Err(message)) => {
            set_error(err, &message);
            None
        }
        Err(payload) => {
            set_error(
                err,
                &format!("{what} panicked: {}", panic_message(&*payload)),
            );
            None
        }
    }
}

/// Runs a drop that has nowhere to report failure; a panic is swallowed
/// rather than unwound into C++ (destructors there are `noexcept`).
fn run_quietly(f: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}

unsafe extern "C" fn node_apply(
    ctx: *mut c_void,
    node: *mut c_void,
    grads: *const *mut C_tensor,
    n_grads: usize,
    out: *mut *mut C_tensor,
    n_out: usize,
    err: *mut c_void,
) -> c_int {
    let result = run(err, "backward", || {
        // SAFETY: `ctx` is the `NodeCtx` leaked by `attach_node` and owned by
        // the node, which serialises calls with a mutex; `grads` holds
        // `n_grads` live tensors for the duration of this call.
        let (state, grads) = unsafe {
            let state = &mut *(ctx as *mut NodeCtx);
            let grads: Vec<_> = (0..n_grads).map(|i| borrow_tensor(*grads.add(i))).collect();
            (state, grads)
        };
        let saved = SavedAccess::new(node);
        let outputs = state.backward.backward(&saved, grads)?;
        if outputs.len() != n_out {
            return Err(format!(
                "backward returned {} gradients for {} inputs",
                outputs.len(),
                n_out
            ));
        }
        Ok(outputs)
    });
    match result {
        Some(outputs) => {
            for (i, grad) in outputs.into_iter().enumerate() {
                // SAFETY: `out` has `n_out` slots (checked above); C++ takes
                // ownership of each non-null tensor.
                unsafe { *out.add(i) = grad.map_or(std::ptr::null_mut(), give_tensor) };
            }
            0
        }
        None => 1,
    }
}

unsafe extern "C" fn node_release(ctx: *mut c_void) {
    run_quietly(|| {
        // SAFETY: see `node_apply`; C++ holds the node's mutex.
        let state = unsafe { &mut *(ctx as *mut NodeCtx) };
        state.backward.release();
    })
}

unsafe extern "C" fn node_drop(ctx: *mut c_void) {
    run_quietly(|| {
        // SAFETY: called once, from the node's destructor, for the box leaked
        // by `attach_node`.
        drop(unsafe { Box::from_raw(ctx as *mut NodeCtx) });
    })
}

unsafe extern "C" fn hooks_pack(
    hooks: *mut c_void,
    tensor: *mut C_tensor,
    param: c_int,
    thread: u64,
    seq: u64,
    err: *mut c_void,
) -> *mut c_void {
    let site = SaveSite {
        param: param != 0,
        // A thread that never created a node has nothing to point at.
        node: seq.checked_sub(1).map(|seq| NodeId { thread, seq }),
    };
    // SAFETY: C++ hands over ownership of `tensor`; `hooks` is the
    // `Arc<dyn HookPair>` box pushed by `push_hooks`, alive while C++ holds it.
    let (pair, tensor) = unsafe { (&*(hooks as *const Arc<dyn HookPair>), take_tensor(tensor)) };
    match run(err, "saved-tensor pack hook", || pair.pack(tensor, site)) {
        Some(payload) => Box::into_raw(Box::new(Mutex::new(payload))) as *mut c_void,
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn hooks_unpack(
    hooks: *mut c_void,
    payload: *mut c_void,
    err: *mut c_void,
) -> *mut C_tensor {
    // SAFETY: as in `hooks_pack`; `payload` is the box it returned, dropped
    // only by `payload_drop`.
    let (pair, payload) = unsafe {
        (
            &*(hooks as *const Arc<dyn HookPair>),
            &*(payload as *const Mutex<Payload>),
        )
    };
    match run(err, "saved-tensor unpack hook", || {
        // A poisoned lock only means an earlier unpack panicked; the payload is intact.
        let payload = lock(payload);
        pair.unpack(&**payload)
    }) {
        Some(t) => give_tensor(t),
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn payload_drop(_hooks: *mut c_void, payload: *mut c_void) {
    run_quietly(|| {
        // SAFETY: called once per payload returned by `hooks_pack`.
        drop(unsafe { Box::from_raw(payload as *mut Mutex<Payload>) });
    })
}

unsafe extern "C" fn hooks_drop(hooks: *mut c_void) {
    run_quietly(|| {
        // SAFETY: called once, when the last C++ reference to the pair goes.
        drop(unsafe { Box::from_raw(hooks as *mut Arc<dyn HookPair>) });
    })
}

unsafe extern "C" fn cuda_oom(device: i64, requested: u64, total: u64, free: u64) {
    // The allocator raises its own error afterwards: a failure to report is
    // swallowed, never unwound into it.
    run_quietly(|| {
        super::cuda::on_oom(super::cuda::OomEvent {
            device,
            requested,
            device_total: total,
            device_free: free,
        })
    })
}

unsafe extern "C" fn cuda_alloc_context(buf: *mut c_char, cap: usize) -> usize {
    let label = catch_unwind(super::cuda::allocation_label).unwrap_or_default();
    let bytes = label.as_bytes();
    let n = bytes.len().min(cap);
    // SAFETY: C++ passes a buffer of `cap` writable bytes; we write `n <= cap`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n) };
    bytes.len()
}
