//! Declarations of `csrc/bridge.h`. Nothing outside `bridge` uses them.

use std::os::raw::{c_char, c_int, c_void};
use torch_sys::C_tensor;

/// An error string owned by the caller, or null.
pub(super) type RematErr = *mut c_char;

/// `REMAT_META_DIMS` of bridge.h.
pub(super) const META_DIMS: usize = 6;

/// `remat_meta` of bridge.h.
#[repr(C)]
#[derive(Default)]
pub(super) struct RawMeta {
    pub storage_key: usize,
    pub storage_nbytes: i64,
    pub storage_offset: i64,
    pub version: u32,
    pub scalar_type: i32,
    pub device: i32,
    pub has_version: u8,
    pub requires_grad: u8,
    pub reserved: u8,
    pub is_placeholder: u8,
    pub ndim: u64,
    pub sizes: [i64; META_DIMS],
    pub strides: [i64; META_DIMS],
}

/// `REMAT_AUTOCAST_DEVICES` of bridge.h.
pub(super) const AUTOCAST_DEVICES: usize = 10;

/// `remat_autocast_state` of bridge.h.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(super) struct RawAutocast {
    pub available: [u8; AUTOCAST_DEVICES],
    pub enabled: [u8; AUTOCAST_DEVICES],
    pub dtype: [i8; AUTOCAST_DEVICES],
    pub cache_enabled: u8,
}

#[repr(C)]
pub(super) struct Callbacks {
    pub node_apply: unsafe extern "C" fn(
        ctx: *mut c_void,
        node: *mut c_void,
        grads: *const *mut C_tensor,
        n_grads: usize,
        out: *mut *mut C_tensor,
        n_out: usize,
        err: *mut c_void,
    ) -> c_int,
    pub node_release: unsafe extern "C" fn(ctx: *mut c_void),
    pub node_drop: unsafe extern "C" fn(ctx: *mut c_void),
    pub hooks_pack: unsafe extern "C" fn(
        hooks: *mut c_void,
        tensor: *mut C_tensor,
        param: c_int,
        thread: u64,
        seq: u64,
        err: *mut c_void,
    ) -> *mut c_void,
    pub hooks_unpack: unsafe extern "C" fn(
        hooks: *mut c_void,
        payload: *mut c_void,
        err: *mut c_void,
    ) -> *mut C_tensor,
    pub payload_drop: unsafe extern "C" fn(hooks: *mut c_void, payload: *mut c_void),
    pub hooks_drop: unsafe extern "C" fn(hooks: *mut c_void),
    pub cuda_oom: unsafe extern "C" fn(device: i64, requested: u64, total: u64, free: u64),
    pub cuda_alloc_context: unsafe extern "C" fn(buf: *mut c_char, cap: usize) -> usize,
}

unsafe extern "C" {
    pub(super) fn remat_bridge_init(callbacks: *const Callbacks);
    pub(super) fn remat_string_free(s: *mut c_char);
    pub(super) fn remat_error_set(err: *mut c_void, msg: *const c_char, len: usize);
    pub(super) fn remat_served_value(t: *const C_tensor, out: *mut *mut C_tensor) -> RematErr;
    pub(super) fn remat_detached_alias(t: *const C_tensor, out: *mut *mut C_tensor) -> RematErr;
    pub(super) fn remat_alias_with_layout(
        of: *const C_tensor,
        sizes: *const i64,
        strides: *const i64,
        ndim: usize,
        storage_offset: i64,
        scalar_type: c_int,
        out: *mut *mut C_tensor,
    ) -> RematErr;

    pub(super) fn remat_fn_apply(
        ctx: *mut c_void,
        name: *const c_char,
        inputs: *const *const C_tensor,
        n_inputs: usize,
        outputs: *mut *mut C_tensor,
        n_outputs: usize,
        saved: *const *const C_tensor,
        n_saved: usize,
        attached: *mut c_int,
    ) -> RematErr;
    pub(super) fn remat_node_saved(
        node: *mut c_void,
        i: usize,
        out: *mut *mut C_tensor,
    ) -> RematErr;

    pub(super) fn remat_grad_fn_saved(
        tensor: *const C_tensor,
        i: usize,
        out: *mut *mut C_tensor,
    ) -> RematErr;

    pub(super) fn remat_hooks_push(hooks: *mut c_void) -> RematErr;
    pub(super) fn remat_hooks_pop() -> RematErr;
    pub(super) fn remat_hooks_depth() -> usize;

    pub(super) fn remat_placeholder_new(
        sizes: *const i64,
        strides: *const i64,
        ndim: usize,
        storage_offset: i64,
        scalar_type: c_int,
        device: c_int,
        nbytes: i64,
        msg: *const c_char,
        out: *mut *mut C_tensor,
    ) -> RematErr;
    pub(super) fn remat_is_placeholder(t: *const C_tensor) -> c_int;

    pub(super) fn remat_tensor_meta(t: *const C_tensor, out: *mut RawMeta) -> RematErr;
    pub(super) fn remat_is_grad_leaf(t: *const C_tensor) -> c_int;
    pub(super) fn remat_storage_key(t: *const C_tensor) -> usize;
    pub(super) fn remat_storage_nbytes(t: *const C_tensor) -> i64;
    pub(super) fn remat_storage_offset(t: *const C_tensor) -> i64;
    pub(super) fn remat_storage_weak_new(t: *const C_tensor) -> *mut c_void;
    pub(super) fn remat_storage_weak_alive(weak: *const c_void) -> c_int;
    pub(super) fn remat_storage_weak_free(weak: *mut c_void);
    pub(super) fn remat_tensor_weak_new(t: *const C_tensor) -> *mut c_void;
    pub(super) fn remat_tensor_weak_upgrade(weak: *const c_void) -> *mut C_tensor;
    pub(super) fn remat_tensor_weak_free(weak: *mut c_void);
    pub(super) fn remat_kept_new(
        t: *const C_tensor,
        out: *mut *mut c_void,
        version: *mut u32,
    ) -> RematErr;
    pub(super) fn remat_kept_from_weak(
        weak: *const c_void,
        out: *mut *mut c_void,
        version: *mut u32,
        live: *mut *mut C_tensor,
    ) -> RematErr;
    pub(super) fn remat_kept_clone(kept: *const c_void, out: *mut *mut c_void) -> RematErr;
    pub(super) fn remat_kept_version(kept: *const c_void) -> u32;
    pub(super) fn remat_kept_tensor(
        kept: *const c_void,
        sizes: *const i64,
        strides: *const i64,
        ndim: usize,
        storage_offset: i64,
        scalar_type: c_int,
        out: *mut *mut C_tensor,
    ) -> RematErr;
    pub(super) fn remat_kept_free(kept: *mut c_void);
    pub(super) fn remat_version(t: *const C_tensor, out: *mut u32) -> RematErr;
    pub(super) fn remat_version_counter_new(t: *const C_tensor, out: *mut *mut c_void) -> RematErr;
    pub(super) fn remat_version_counter_get(counter: *const c_void) -> u32;
    pub(super) fn remat_version_counter_free(counter: *mut c_void);
    pub(super) fn remat_grad_mode_enabled() -> c_int;
    pub(super) fn remat_grad_mode_set(enabled: c_int);
    pub(super) fn remat_untracked_push() -> *mut c_void;
    pub(super) fn remat_untracked_pop(guard: *mut c_void);
    pub(super) fn remat_autocast_get(out: *mut RawAutocast) -> RematErr;
    pub(super) fn remat_autocast_set(state: *const RawAutocast) -> RematErr;
    pub(super) fn remat_autocast_increment_nesting() -> c_int;
    pub(super) fn remat_autocast_decrement_nesting() -> c_int;
    pub(super) fn remat_autocast_clear_cache() -> RematErr;
    pub(super) fn remat_graph_task_id() -> c_int;
    pub(super) fn remat_graph_task_keep_graph() -> c_int;
    pub(super) fn remat_heap_bytes_in_use() -> i64;
    pub(super) fn remat_heap_watch(roots: *const *const C_tensor, n_roots: usize) -> RematErr;
    pub(super) fn remat_heap_peak_reset();
    pub(super) fn remat_heap_peak() -> i64;
    pub(super) fn remat_sequence_number_peek() -> i64;
    pub(super) fn remat_bytes_in_use(device: c_int) -> i64;
    pub(super) fn remat_trace_backward(root: *const C_tensor, device: c_int) -> RematErr;
    pub(super) fn remat_trace_count() -> usize;
    pub(super) fn remat_trace_read(seqs: *mut i64, bytes: *mut i64, capacity: usize) -> usize;
    pub(super) fn remat_is_parameter(t: *const C_tensor) -> c_int;
    pub(super) fn remat_rng_get_state(device: c_int, out: *mut *mut C_tensor) -> RematErr;
    pub(super) fn remat_rng_set_state(device: c_int, state: *const C_tensor) -> RematErr;
    pub(super) fn remat_generators_take(out: *mut *mut c_void) -> RematErr;
    pub(super) fn remat_generators_is_current(snapshot: *const c_void, out: *mut c_int)
        -> RematErr;
    pub(super) fn remat_generators_restore(snapshot: *const c_void) -> RematErr;
    pub(super) fn remat_generators_free(snapshot: *mut c_void);
    pub(super) fn remat_stop_available() -> c_int;
    pub(super) fn remat_stop_arm(
        read_message: *const c_char,
        read_len: usize,
        no_meta_message: *const c_char,
        no_meta_len: usize,
        active: c_int,
    ) -> *mut c_void;
    pub(super) fn remat_stop_activate();
    pub(super) fn remat_stop_disarm(previous: *mut c_void);
    pub(super) fn remat_stop_now(end_op: c_int) -> c_int;
    pub(super) fn remat_stop_dry_copy(t: *const C_tensor, out: *mut *mut C_tensor) -> RematErr;
    pub(super) fn remat_stop_is_dry() -> c_int;
    pub(super) fn remat_dry_log_begin();
    pub(super) fn remat_dry_log_end() -> *mut c_char;
    pub(super) fn remat_backward(loss: *const C_tensor, keep_graph: c_int) -> RematErr;
    pub(super) fn remat_cuda_built() -> c_int;
    pub(super) fn remat_cuda_attach_oom_observer() -> RematErr;
    pub(super) fn remat_cuda_record_contexts(enabled: c_int) -> RematErr;
    pub(super) fn remat_cuda_blocks(out: *mut *mut c_char) -> RematErr;
    pub(super) fn remat_cuda_copy_out(
        src: *const C_tensor,
        out: *mut *mut C_tensor,
        event: *mut *mut c_void,
    ) -> RematErr;
    pub(super) fn remat_cuda_copy_back(
        host: *const C_tensor,
        device: c_int,
        after: *mut c_void,
        out: *mut *mut C_tensor,
        event: *mut *mut c_void,
    ) -> RematErr;
    pub(super) fn remat_cuda_use(t: *const C_tensor, event: *mut c_void) -> RematErr;
    pub(super) fn remat_cuda_event_free(event: *mut c_void);
    pub(super) fn remat_storage_data(t: *const C_tensor) -> usize;
    pub(super) fn remat_cuda_memory_stats(device: c_int, out: *mut i64) -> RematErr;
    pub(super) fn remat_cuda_reset_peak(device: c_int) -> RematErr;
    pub(super) fn remat_cuda_use_stream(device: c_int, side: c_int, id: *mut i64) -> RematErr;
    pub(super) fn remat_cuda_current_stream(device: c_int, id: *mut i64) -> RematErr;
    pub(super) fn remat_set_deterministic_algorithms(enabled: c_int) -> RematErr;
    pub(super) fn remat_graph_nodes(
        roots: *const *const C_tensor,
        n_roots: usize,
        out: *mut *mut c_char,
    ) -> RematErr;
}
