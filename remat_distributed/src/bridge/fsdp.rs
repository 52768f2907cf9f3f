//! The sharded units of `csrc/fsdp.cpp`: one C++ object per
//! `FullyShardedDataParallel`, its units by index.

use super::{c_string, check, ffi, handles, Group};
use std::ffi::CString;
use tch::Tensor;
use torch_sys::C_tensor;

pub(crate) struct Fsdp(*mut ffi::RawFsdp);

/// libtorch's `c10::ScalarType` code of a floating dtype (tch keeps its
/// own mapping private; units gather and reduce in floating dtypes only).
pub(crate) fn floating_code(kind: tch::Kind) -> Result<std::os::raw::c_int, String> {
    use tch::Kind::*;
    match kind {
        Half => Ok(5),
        Float => Ok(6),
        Double => Ok(7),
        BFloat16 => Ok(15),
        other => Err(format!(
            "{other:?} is no floating dtype: a unit gathers and reduces in Half, BFloat16, Float \
             or Double"
        )),
    }
}

/// [`floating_code`], or -1 for none.
fn code(kind: Option<tch::Kind>) -> Result<std::os::raw::c_int, String> {
    kind.map_or(Ok(-1), floating_code)
}

impl Fsdp {
    pub(crate) fn new(
        group: &Group,
        reshard_after_forward: bool,
        prefetch: bool,
        rank_order: bool,
    ) -> Result<Fsdp, String> {
        let mut out = std::ptr::null_mut();
        // SAFETY: the group is live; `out` is written only on success. The
        // C++ object keeps its own reference to the process group.
        check(unsafe {
            ffi::remat_dist_fsdp_new(
                group.0,
                reshard_after_forward as _,
                prefetch as _,
                rank_order as _,
                &mut out,
            )
        })?;
        Ok(Fsdp(out))
    }

    /// Shards `params` (named `names`) into `shard`; returns the unit's index.
    pub(crate) fn add_unit(
        &self,
        name: &str,
        names: &[String],
        params: &[&Tensor],
        shard: &Tensor,
        param_dtype: Option<tch::Kind>,
        reduce_dtype: Option<tch::Kind>,
    ) -> Result<usize, String> {
        let name = c_string(name)?;
        let names: Vec<CString> = names
            .iter()
            .map(|n| c_string(n))
            .collect::<Result<_, _>>()?;
        let name_ptrs: Vec<*const std::os::raw::c_char> =
            names.iter().map(|n| n.as_ptr()).collect();
        let hs = handles(params);
        let (param_dtype, reduce_dtype) = (code(param_dtype)?, code(reduce_dtype)?);
        let mut index = 0usize;
        // SAFETY: every pointer array holds `params.len()` live entries for
        // the call (names and handles alike); C++ copies the strings and
        // keeps its own references to the tensors.
        check(unsafe {
            ffi::remat_dist_fsdp_add_unit(
                self.0,
                name.as_ptr(),
                name_ptrs.as_ptr(),
                hs.as_ptr(),
                hs.len(),
                shard.as_ptr() as *mut C_tensor,
                param_dtype,
                reduce_dtype,
                &mut index,
            )
        })?;
        Ok(index)
    }

    pub(crate) fn pre_forward(&self, unit: usize, recomputing: bool) -> Result<(), String> {
        // SAFETY: the object is live; C++ checks the index.
        check(unsafe { ffi::remat_dist_fsdp_pre_forward(self.0, unit, recomputing as _) })
    }

    pub(crate) fn post_forward(
        &self,
        unit: usize,
        outputs: &[&Tensor],
        recomputing: bool,
    ) -> Result<(), String> {
        let hs = handles(outputs);
        // SAFETY: the object is live; `hs` borrows live handles for the call
        // (the hooks C++ registers hold C++ state only).
        check(unsafe {
            ffi::remat_dist_fsdp_post_forward(self.0, unit, hs.as_ptr(), hs.len(), recomputing as _)
        })
    }

    pub(crate) fn gather_into(&self, unit: usize, out: &Tensor) -> Result<(), String> {
        // SAFETY: the object is live; the handle is borrowed for the call and
        // C++ checks its size before writing into it.
        check(unsafe {
            ffi::remat_dist_fsdp_gather_into(self.0, unit, out.as_ptr() as *mut C_tensor)
        })
    }

    /// The last step's events as (kind, unit, ns).
    pub(crate) fn events(&self) -> Result<Vec<[i64; 3]>, String> {
        let mut cap = 256usize;
        loop {
            let mut buf = vec![0i64; 3 * cap];
            let mut n = 0usize;
            // SAFETY: `buf` holds 3 * cap elements; the object is live.
            check(unsafe { ffi::remat_dist_fsdp_events(self.0, buf.as_mut_ptr(), cap, &mut n) })?;
            if n <= cap {
                return Ok(buf[..3 * n].chunks(3).map(|c| [c[0], c[1], c[2]]).collect());
            }
            cap = n;
        }
    }

    /// Bytes gathered now, and the most at once in the last backward.
    pub(crate) fn gathered_bytes(&self) -> Result<(usize, usize), String> {
        let (mut now, mut peak) = (0usize, 0usize);
        // SAFETY: the object is live; both outputs are written once.
        check(unsafe { ffi::remat_dist_fsdp_gathered_bytes(self.0, &mut now, &mut peak) })?;
        Ok((now, peak))
    }
}

impl Drop for Fsdp {
    fn drop(&mut self) {
        // SAFETY: owned, freed once; the hooks it registered are removed and
        // those on outputs hold only a weak reference to its state.
        let _ = check(unsafe { ffi::remat_dist_fsdp_free(self.0) });
    }
}

// SAFETY: the C++ object guards all its state with one recursive mutex
// (hooks on autograd's thread, forwards on the caller's, Gloo's callbacks
// touch only their own locked log), so it may be used from any thread.
unsafe impl Send for Fsdp {}
// SAFETY: as for `Send`: every entry point takes the object's lock.
unsafe impl Sync for Fsdp {}
