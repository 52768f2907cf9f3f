//! The libtorch bridge: the only module with `unsafe` code.
//!
//! `csrc/bridge.cpp` implements what tch does not expose (custom autograd
//! nodes, default saved-tensor hooks, placeholder storages, storage identity);
//! this module wraps it in safe Rust. Conventions: tensors cross as
//! `at::Tensor*` (tch's `C_tensor`); C++ exceptions come back as error
//! strings; Rust callbacks catch every panic before returning to C++.

mod autocast;
mod autograd;
mod callbacks;
mod cuda;
pub(crate) mod cuda_copy;
mod device;
mod dry_tail;
mod ffi;
mod heap;
mod hook_stack;
mod kept;
mod kind_code;
mod memory_trace;
mod meta;
mod node;
mod placeholder;
mod rng;
mod saved_repr;
mod storage;
mod untracked;

pub(crate) use autocast::{
    available_devices, decrement_nesting, device_slot, increment_nesting, AutocastState,
};
pub use autograd::{
    backward_with, grad_enabled, graph_task_id, graph_task_keeps_graph, set_grad_enabled,
    GradModeGuard,
};
pub(crate) use autograd::{is_parameter, no_grad};
pub(crate) use cuda::{
    attach_oom_observer, cuda_blocks, cuda_built, record_allocation_contexts, OomEvent,
};
pub(crate) use device::{
    cuda_current_stream, cuda_memory_stats, cuda_reset_peak, cuda_use_stream,
    set_deterministic_algorithms,
};
pub use dry_tail::dry_ops;
pub(crate) use dry_tail::{
    dry_copy, stop_activate, stop_available, stop_is_dry, stop_now, StopArmed,
};
pub use heap::{backward_heap_peak, heap_bytes_in_use};
pub(crate) use hook_stack::{
    hooks_depth, pop_hooks, push_hooks, HookPair, NodeId, Payload, SaveSite,
};
pub(crate) use kept::{FromWeak, KeptStorage};
pub(crate) use kind_code::kind_of_code;
pub(crate) use memory_trace::{bytes_in_use, sequence_number, traced_backward};
pub(crate) use meta::{is_grad_leaf, Dims, TensorMeta};
pub(crate) use node::{
    attach_node, grad_fn_saved, graph_nodes, served_value, NodeBackward, SavedAccess,
};
pub use placeholder::{is_placeholder, placeholder, PlaceholderSpec};
pub(crate) use rng::GeneratorsSnapshot;
pub use rng::{rng_state, set_rng_state};
pub use saved_repr::Saved;
pub(crate) use saved_repr::{peel_ref_slice, peel_slice, wrap_slice};
pub(crate) use storage::{
    alias_with_layout, detached_alias, storage_data, storage_offset, VersionCounter,
};
pub use storage::{
    storage_key, storage_nbytes, tensor_version, StorageKey, WeakStorage, WeakTensor,
};
pub(crate) use untracked::UntrackedGuard;

use crate::error::{Error, Result};
use std::ffi::CStr;
use std::mem::ManuallyDrop;
use tch::Tensor;
use torch_sys::C_tensor;

/// Registers the Rust callbacks and installs remat's autograd engine, once.
fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: the table holds `extern "C"` functions that never unwind;
        // C++ copies it before returning.
        unsafe { ffi::remat_bridge_init(&callbacks::CALLBACKS) }
    });
}

/// Converts a bridge error string (owned, possibly null) into a `Result`.
fn check(err: ffi::RematErr) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null error is a NUL-terminated heap string from the
    // bridge; we copy it and free it exactly once.
    let message = unsafe {
        let text = CStr::from_ptr(err).to_string_lossy().into_owned();
        ffi::remat_string_free(err);
        text
    };
    Err(Error::torch(message))
}

/// Wraps a tensor pointer that the bridge handed over (owned).
///
/// # Safety
/// `ptr` must be a non-null `at::Tensor*` allocated with `new` and owned by
/// nobody else.
unsafe fn take_tensor(ptr: *mut C_tensor) -> Tensor {
    // SAFETY: the caller guarantees ownership; tch frees it with `delete`.
    unsafe { Tensor::from_ptr(ptr) }
}

/// A new handle to a tensor the bridge lends us for the duration of a call.
///
/// # Safety
/// `ptr` must point to a live `at::Tensor`.
unsafe fn borrow_tensor(ptr: *const C_tensor) -> Tensor {
    // SAFETY: ManuallyDrop keeps tch from freeing the borrowed handle; the
    // shallow clone is a new, owned handle to the same tensor.
    let borrowed = ManuallyDrop::new(unsafe { Tensor::from_ptr(ptr as *mut C_tensor) });
    borrowed.shallow_clone()
}

/// Hands an owned tensor to the bridge, which deletes it.
fn give_tensor(t: Tensor) -> *mut C_tensor {
    let mut t = ManuallyDrop::new(t);
    t.as_mut_ptr()
}
