//! The bridge to c10d (`csrc/dist.cpp`): the only module of this crate
//! with `unsafe` code. C++ exceptions come back as error strings
//! (remat_runtime's `guard`); no Rust callback is handed to C++, so no
//! panic can unwind into it.

mod ffi;
mod fsdp;

pub(crate) use fsdp::{floating_code, Fsdp};

use std::ffi::{CStr, CString};
use tch::Tensor;
use torch_sys::C_tensor;

/// The first line of a C++ error (c10d appends a backtrace and context).
pub(super) fn check(err: ffi::DistErr) -> Result<(), String> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null error is a NUL-terminated malloc'd string from
    // `guard`, owned by us; it is read once and freed once.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above; not used after this.
    unsafe { ffi::remat_dist_string_free(err) };
    Err(msg.lines().next().unwrap_or_default().trim().to_string())
}

pub(super) fn c_string(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("{s:?} holds a NUL byte"))
}

pub(super) fn handles(ts: &[&Tensor]) -> Vec<*mut C_tensor> {
    ts.iter().map(|t| t.as_ptr() as *mut C_tensor).collect()
}

/// A joined process group (c10d's `ProcessGroup` with its Gloo backend and
/// the store it was formed through).
pub(crate) struct Group(pub(super) *mut ffi::RawGroup);

impl Group {
    pub(crate) fn new(
        host: &str,
        port: u16,
        rank: i32,
        world_size: i32,
        timeout_ms: i64,
        device_host: &str,
        nccl: bool,
    ) -> Result<Group, String> {
        let host = c_string(host)?;
        let device_host = c_string(device_host)?;
        let mut out = std::ptr::null_mut();
        // SAFETY: both strings live across the call; `out` is written only
        // on success.
        check(unsafe {
            ffi::remat_dist_group_new(
                host.as_ptr(),
                port,
                rank,
                world_size,
                timeout_ms,
                device_host.as_ptr(),
                nccl as _,
                &mut out,
            )
        })?;
        Ok(Group(out))
    }

    pub(crate) fn all_reduce_sum(&self, t: &mut Tensor) -> Result<(), String> {
        // SAFETY: the group is live; the tensor handle is borrowed for the call.
        check(unsafe { ffi::remat_dist_all_reduce_sum(self.0, t.as_mut_ptr()) })
    }

    pub(crate) fn broadcast(&self, t: &mut Tensor, root: i32) -> Result<(), String> {
        // SAFETY: as in `all_reduce_sum`.
        check(unsafe { ffi::remat_dist_broadcast(self.0, t.as_mut_ptr(), root) })
    }

    pub(crate) fn barrier(&self) -> Result<(), String> {
        // SAFETY: the group is live.
        check(unsafe { ffi::remat_dist_barrier(self.0) })
    }

    pub(crate) fn broadcast_coalesced(&self, ts: &[&Tensor], bytes: i64) -> Result<(), String> {
        let hs = handles(ts);
        // SAFETY: `hs` borrows live tensor handles for the call; C++ copies
        // the tensors (shared storage) and deletes none of them.
        check(unsafe { ffi::remat_dist_broadcast_coalesced(self.0, hs.as_ptr(), hs.len(), bytes) })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: owned, freed once; the Reducers made from it hold their
        // own reference to the C++ group.
        unsafe { ffi::remat_dist_group_free(self.0) }
    }
}

/// c10d's `Reducer` over a fixed list of parameters.
pub(crate) struct Reducer(*mut ffi::RawReducer);

impl Reducer {
    pub(crate) fn new(
        group: &Group,
        params: &[&Tensor],
        first_bucket_bytes: i64,
        bucket_bytes: i64,
        find_unused: bool,
        static_graph: bool,
    ) -> Result<Reducer, String> {
        let hs = handles(params);
        let mut out = std::ptr::null_mut();
        // SAFETY: the group is live; `hs` borrows live handles for the call
        // (the Reducer keeps its own references to the tensors).
        check(unsafe {
            ffi::remat_dist_reducer_new(
                group.0,
                hs.as_ptr(),
                hs.len(),
                first_bucket_bytes,
                bucket_bytes,
                find_unused as _,
                static_graph as _,
                &mut out,
            )
        })?;
        Ok(Reducer(out))
    }

    pub(crate) fn rebuild_buckets(&self) -> Result<(), String> {
        // SAFETY: the reducer is live.
        check(unsafe { ffi::remat_dist_reducer_rebuild_buckets(self.0) })
    }

    pub(crate) fn prepare_for_backward(&self, outputs: &[&Tensor]) -> Result<(), String> {
        let hs = handles(outputs);
        // SAFETY: the reducer is live; `hs` borrows live handles for the call.
        check(unsafe { ffi::remat_dist_reducer_prepare(self.0, hs.as_ptr(), hs.len()) })
    }

    /// Records, when `t`'s next gradient is computed, how many buckets had
    /// been launched.
    pub(crate) fn watch(&self, t: &Tensor) -> Result<(), String> {
        // SAFETY: the reducer is live; the handle is borrowed for the call
        // (the hook C++ registers keeps no Rust state).
        check(unsafe { ffi::remat_dist_reducer_watch(self.0, t.as_ptr() as *mut C_tensor) })
    }

    /// The last backward's record: reports per parameter, `(launch,
    /// completion)` ns per bucket launched (-1: not complete), and the
    /// watched tensors' counts.
    #[allow(clippy::type_complexity)]
    pub(crate) fn stats(
        &self,
        n_params: usize,
    ) -> Result<(Vec<i64>, Vec<(i64, i64)>, Vec<i64>), String> {
        let mut reports = vec![0i64; n_params];
        // Buckets launch at most once each per backward, and few tensors
        // are watched; a second call with room for what was counted is
        // made if the first ran out.
        let (mut launch_cap, mut watch_cap) = (n_params.max(1), 16usize);
        loop {
            let mut launches = vec![0i64; 2 * launch_cap];
            let mut watched = vec![0i64; watch_cap];
            let (mut n_launches, mut n_watched) = (0usize, 0usize);
            // SAFETY: every buffer holds as many elements as its cap says
            // (`launches` two per cap); the reducer is live.
            check(unsafe {
                ffi::remat_dist_reducer_stats(
                    self.0,
                    reports.as_mut_ptr(),
                    reports.len(),
                    launches.as_mut_ptr(),
                    launch_cap,
                    &mut n_launches,
                    watched.as_mut_ptr(),
                    watch_cap,
                    &mut n_watched,
                )
            })?;
            if n_launches <= launch_cap && n_watched <= watch_cap {
                let pairs = launches[..2 * n_launches]
                    .chunks(2)
                    .map(|p| (p[0], p[1]))
                    .collect();
                watched.truncate(n_watched);
                return Ok((reports, pairs, watched));
            }
            launch_cap = launch_cap.max(n_launches);
            watch_cap = watch_cap.max(n_watched);
        }
    }

    /// The buckets as indices into the parameters, in the order they are
    /// reduced.
    pub(crate) fn buckets(&self, n_params: usize) -> Result<Vec<Vec<usize>>, String> {
        let mut idx = vec![0usize; n_params];
        let mut lens = vec![0usize; n_params];
        let mut n = 0usize;
        // SAFETY: both buffers hold as many elements as their caps say; a
        // bucket assignment has at most one bucket per parameter and lists
        // each parameter once.
        check(unsafe {
            ffi::remat_dist_reducer_buckets(
                self.0,
                idx.as_mut_ptr(),
                idx.len(),
                lens.as_mut_ptr(),
                lens.len(),
                &mut n,
            )
        })?;
        let mut out = Vec::with_capacity(n);
        let mut at = 0;
        for &len in &lens[..n.min(lens.len())] {
            out.push(idx[at..at + len].to_vec());
            at += len;
        }
        Ok(out)
    }
}

impl Drop for Reducer {
    fn drop(&mut self) {
        // SAFETY: owned, freed once. An error from ~Reducer has no one to
        // tell it to; it is dropped.
        let _ = check(unsafe { ffi::remat_dist_reducer_free(self.0) });
    }
}
