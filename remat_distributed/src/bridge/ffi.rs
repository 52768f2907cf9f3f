//! The C ABI of `csrc/dist.h`, declared as it is written there.

use std::os::raw::{c_char, c_int};
use torch_sys::C_tensor;

pub(crate) type DistErr = *mut c_char;

#[repr(C)]
pub(crate) struct RawGroup {
    _opaque: [u8; 0],
}

#[repr(C)]
pub(crate) struct RawReducer {
    _opaque: [u8; 0],
}

#[repr(C)]
pub(crate) struct RawFsdp {
    _opaque: [u8; 0],
}

extern "C" {
    pub(crate) fn remat_dist_string_free(s: *mut c_char);
    pub(crate) fn remat_dist_group_new(
        host: *const c_char,
        port: u16,
        rank: c_int,
        world_size: c_int,
        timeout_ms: i64,
        device_host: *const c_char,
        nccl: c_int,
        out: *mut *mut RawGroup,
    ) -> DistErr;
    pub(crate) fn remat_dist_group_free(g: *mut RawGroup);
    pub(crate) fn remat_dist_all_reduce_sum(g: *mut RawGroup, t: *mut C_tensor) -> DistErr;
    pub(crate) fn remat_dist_broadcast(g: *mut RawGroup, t: *mut C_tensor, root: c_int) -> DistErr;
    pub(crate) fn remat_dist_barrier(g: *mut RawGroup) -> DistErr;
    pub(crate) fn remat_dist_broadcast_coalesced(
        g: *mut RawGroup,
        ts: *const *mut C_tensor,
        n: usize,
        buffer_bytes: i64,
    ) -> DistErr;
    pub(crate) fn remat_dist_reducer_new(
        g: *mut RawGroup,
        params: *const *mut C_tensor,
        n: usize,
        first_bucket_bytes: i64,
        bucket_bytes: i64,
        find_unused: c_int,
        static_graph: c_int,
        out: *mut *mut RawReducer,
    ) -> DistErr;
    pub(crate) fn remat_dist_reducer_free(r: *mut RawReducer) -> DistErr;
    pub(crate) fn remat_dist_reducer_rebuild_buckets(r: *mut RawReducer) -> DistErr;
    pub(crate) fn remat_dist_reducer_prepare(
        r: *mut RawReducer,
        outputs: *const *mut C_tensor,
        n: usize,
    ) -> DistErr;
    pub(crate) fn remat_dist_reducer_buckets(
        r: *mut RawReducer,
        idx: *mut usize,
        cap: usize,
        lens: *mut usize,
        lens_cap: usize,
        n_buckets: *mut usize,
    ) -> DistErr;
    pub(crate) fn remat_dist_reducer_watch(r: *mut RawReducer, t: *mut C_tensor) -> DistErr;
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn remat_dist_reducer_stats(
        r: *mut RawReducer,
        reports: *mut i64,
        n_params: usize,
        launches: *mut i64,
        launch_cap: usize,
        n_launches: *mut usize,
        watched: *mut i64,
        watch_cap: usize,
        n_watched: *mut usize,
    ) -> DistErr;
    pub(crate) fn remat_dist_fsdp_new(
        g: *mut RawGroup,
        reshard_after_forward: c_int,
        prefetch: c_int,
        rank_order: c_int,
        out: *mut *mut RawFsdp,
    ) -> DistErr;
    pub(crate) fn remat_dist_fsdp_free(f: *mut RawFsdp) -> DistErr;
    pub(crate) fn remat_dist_fsdp_add_unit(
        f: *mut RawFsdp,
        name: *const c_char,
        param_names: *const *const c_char,
        params: *const *mut C_tensor,
        n: usize,
        shard: *mut C_tensor,
        param_dtype: c_int,
        reduce_dtype: c_int,
        index: *mut usize,
    ) -> DistErr;
    pub(crate) fn remat_dist_fsdp_pre_forward(
        f: *mut RawFsdp,
        i: usize,
        recomputing: c_int,
    ) -> DistErr;
    pub(crate) fn remat_dist_fsdp_post_forward(
        f: *mut RawFsdp,
        i: usize,
        outputs: *const *mut C_tensor,
        n: usize,
        recomputing: c_int,
    ) -> DistErr;
    pub(crate) fn remat_dist_fsdp_gather_into(
        f: *mut RawFsdp,
        i: usize,
        out: *mut C_tensor,
    ) -> DistErr;
    pub(crate) fn remat_dist_fsdp_events(
        f: *mut RawFsdp,
        buf: *mut i64,
        cap: usize,
        n: *mut usize,
    ) -> DistErr;
    pub(crate) fn remat_dist_fsdp_gathered_bytes(
        f: *mut RawFsdp,
        now: *mut usize,
        backward_peak: *mut usize,
    ) -> DistErr;
}
