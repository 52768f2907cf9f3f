//! libtorch's default random generators (CPU and CUDA): their state as a
//! byte tensor, read and restored.

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
