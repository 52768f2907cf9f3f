//! libtorch's default random generators (CPU and CUDA): their state as a
//! byte tensor, read and restored; and all of them at once as an opaque
//! snapshot ([`GeneratorsSnapshot`]), what a checkpoint keeps to recompute
//! with its forward's random numbers.

use super::{check, ffi};
use crate::error::Result;
use tch::Tensor;

/// The state of libtorch's default random generator for `device` (CPU, or a
/// CUDA device), as a byte tensor.
///
/// ```
/// use remat_runtime::{autograd::rng_state, autograd::set_rng_state};
/// let s = rng_state(tch::Device::Cpu).unwrap();
/// let a = tch::Tensor::rand([3], tch::kind::FLOAT_CPU);
/// set_rng_state(tch::Device::Cpu, &s).unwrap();
/// assert!(a.equal(&tch::Tensor::rand([3], tch::kind::FLOAT_CPU)));
/// ```
pub fn rng_state(device: tch::Device) -> Result<Tensor> {
    let mut out: *mut torch_sys::C_tensor = std::ptr::null_mut();
    // SAFETY: on success `out` is an owned tensor.
    unsafe {
        check(ffi::remat_rng_get_state(generator_code(device)?, &mut out))?;
        Ok(super::take_tensor(out))
    }
}

/// Sets the state of `device`'s default generator (from [`rng_state`]).
///
/// ```
/// use remat_runtime::{autograd::rng_state, autograd::set_rng_state};
/// use tch::{kind::FLOAT_CPU, Device, Tensor};
/// let state = rng_state(Device::Cpu).unwrap();
/// let first = Tensor::rand([3], FLOAT_CPU);
/// set_rng_state(Device::Cpu, &state).unwrap(); // rewind
/// assert!(first.equal(&Tensor::rand([3], FLOAT_CPU)));
/// assert!(set_rng_state(Device::Mps, &state).is_err()); // only CPU and CUDA
/// ```
pub fn set_rng_state(device: tch::Device, state: &Tensor) -> Result<()> {
    // SAFETY: `state` is a live tensor.
    check(unsafe { ffi::remat_rng_set_state(generator_code(device)?, state.as_ptr()) })
}

fn generator_code(device: tch::Device) -> Result<std::os::raw::c_int> {
    match device {
        tch::Device::Cpu => Ok(-1),
        tch::Device::Cuda(i) => Ok(i as std::os::raw::c_int),
        other => Err(crate::Error::torch(format!(
            "no default generator for {other:?}"
        ))),
    }
}

/// Every default generator's state at one moment: the CPU generator's
/// engine and, per visible CUDA device, its seed and offset
/// (`csrc/generators.cpp`). Immutable once taken.
pub(crate) struct GeneratorsSnapshot(std::ptr::NonNull<std::ffi::c_void>);

// SAFETY: the snapshot is plain data owned by this handle, never changed
// after `take`; C++ reads it only through `&self` methods.
unsafe impl Send for GeneratorsSnapshot {}
// SAFETY: see `Send`: every access through `&self` only reads.
unsafe impl Sync for GeneratorsSnapshot {}

impl GeneratorsSnapshot {
    /// The generators' state now.
    pub(crate) fn take() -> Result<Self> {
        let mut out = std::ptr::null_mut();
        // SAFETY: `out` is a valid out-pointer; on success it holds a
        // snapshot this handle owns.
        check(unsafe { ffi::remat_generators_take(&mut out) })?;
        std::ptr::NonNull::new(out)
            .map(GeneratorsSnapshot)
            .ok_or_else(|| crate::Error::Internal("no generator snapshot".into()))
    }

    /// Whether the generators are in this state now (nothing drew since, or
    /// they were put back): compares without allocating.
    pub(crate) fn is_current(&self) -> Result<bool> {
        let mut same = 0;
        // SAFETY: `self.0` is a live snapshot; `same` a valid out-pointer.
        check(unsafe { ffi::remat_generators_is_current(self.0.as_ptr(), &mut same) })?;
        Ok(same != 0)
    }

    /// Sets every generator it holds to its state.
    pub(crate) fn restore(&self) -> Result<()> {
        // SAFETY: `self.0` is a live snapshot.
        check(unsafe { ffi::remat_generators_restore(self.0.as_ptr()) })
    }
}

impl Drop for GeneratorsSnapshot {
    fn drop(&mut self) {
        // SAFETY: frees the snapshot made in `take`, once.
        unsafe { ffi::remat_generators_free(self.0.as_ptr()) }
    }
}
