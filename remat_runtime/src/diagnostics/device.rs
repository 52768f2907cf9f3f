//! `remat::diagnostics::device`: what device-generic code needs beyond tch: a device
//! named on a command line (`cpu`, `cuda`, `cuda:N`) checked against the
//! machine, waiting for a device's queued work, the CUDA caching
//! allocator's byte counters, the thread's CUDA stream, and libtorch's
//! deterministic-algorithms switch (docs/semantics.md, rule D7).
//!
//! Invariant: nothing here needs a GPU to build or to be called; without a
//! CUDA device every CUDA call returns [`Error::Unsupported`] (E29) and
//! never touches the CUDA runtime.

use crate::bridge;
use crate::error::{Error, Result};
use tch::Device;

/// The device a command line names: `cpu`, `cuda` (device 0) or `cuda:N`.
/// A CUDA device must be visible (E35).
///
/// ```
/// use remat_runtime::diagnostics::device::parse;
/// assert_eq!(parse("cpu").unwrap(), tch::Device::Cpu);
/// assert!(parse("tpu").unwrap_err().to_string().contains("not a device"));
/// if !tch::Cuda::is_available() {
///     let err = parse("cuda:1").unwrap_err().to_string();
///     assert!(err.contains("no CUDA device is visible"), "{err}");
/// }
/// ```
pub fn parse(text: &str) -> Result<Device> {
    let index = match from_name(text.trim()) {
        Some(Device::Cpu) => return Ok(Device::Cpu),
        Some(Device::Cuda(i)) => i,
        _ => {
            return Err(Error::Unsupported(format!(
                "device: `{text}` is not a device; give cpu, cuda or cuda:N"
            )))
        }
    };
    let visible = if tch::Cuda::is_available() {
        tch::Cuda::device_count() as usize
    } else {
        0
    };
    if index >= visible {
        let seen = match visible {
            0 => "no CUDA device is visible".to_string(),
            n => format!("{n} CUDA device(s) are visible (cuda:0 to cuda:{})", n - 1),
        };
        return Err(Error::Unsupported(format!(
            "device: `{text}` is not available: {seen} (a build without the `cuda` feature \
             sees none)"
        )));
    }
    Ok(Device::Cuda(index))
}

/// A device's name as remat writes it (`cpu`, `cuda:N`, `mps`, `vulkan`):
/// in reports, and in policy files (`offload:cuda:1`).
pub(crate) fn name_of(device: Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::Mps => "mps".into(),
        Device::Vulkan => "vulkan".into(),
    }
}

/// The converse of [`name_of`], syntax only (`cuda` is `cuda:0`); whether
/// the device is there is [`parse`]'s question.
pub(crate) fn from_name(text: &str) -> Option<Device> {
    match text {
        "cpu" => Some(Device::Cpu),
        "cuda" => Some(Device::Cuda(0)),
        "mps" => Some(Device::Mps),
        "vulkan" => Some(Device::Vulkan),
        _ => text
            .strip_prefix("cuda:")
            .and_then(|i| i.parse().ok())
            .map(Device::Cuda),
    }
}

/// Waits until the work queued on `device` is done (nothing to wait for on
/// the CPU): what a wall-clock time of GPU work needs at both ends.
///
/// ```
/// remat_runtime::diagnostics::device::synchronize(tch::Device::Cpu);
/// ```
pub fn synchronize(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

/// The CUDA caching allocator's counters for one device, in bytes
/// (`torch.cuda.memory_allocated` and its kin).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaMemory {
    /// Bytes in live tensors' blocks now.
    pub allocated: i64,
    /// The most `allocated` has been since the last [`reset_cuda_peak`].
    pub peak_allocated: i64,
    /// Bytes the allocator holds from the driver now (allocated or cached).
    pub reserved: i64,
    /// The most `reserved` has been since the last [`reset_cuda_peak`].
    pub peak_reserved: i64,
}

fn cuda_index(what: &str, device: Device) -> Result<i32> {
    let Device::Cuda(i) = device else {
        return Err(Error::Unsupported(format!(
            "{what} needs CUDA: {device:?} is not a CUDA device"
        )));
    };
    if !tch::Cuda::is_available() {
        return Err(Error::Unsupported(format!(
            "{what} needs CUDA, but no CUDA device is visible"
        )));
    }
    Ok(i as i32)
}

/// The allocator's counters of `device` (E29 off CUDA).
///
/// ```
/// use remat_runtime::diagnostics::device::cuda_memory;
/// if !tch::Cuda::is_available() {
///     assert!(cuda_memory(tch::Device::Cuda(0)).unwrap_err().to_string().contains("needs CUDA"));
/// }
/// ```
pub fn cuda_memory(device: Device) -> Result<CudaMemory> {
    let i = cuda_index("cuda_memory", device)?;
    let [allocated, peak_allocated, reserved, peak_reserved] = bridge::cuda_memory_stats(i)?;
    Ok(CudaMemory {
        allocated,
        peak_allocated,
        reserved,
        peak_reserved,
    })
}

/// Starts the peak counters of `device` again from the current values, so
/// that the next peak is the peak of what follows (E29 off CUDA).
///
/// ```
/// use remat_runtime::diagnostics::device::reset_cuda_peak;
/// assert!(reset_cuda_peak(tch::Device::Cpu).is_err());
/// ```
pub fn reset_cuda_peak(device: Device) -> Result<()> {
    bridge::cuda_reset_peak(cuda_index("reset_cuda_peak", device)?)
}

/// The id of this thread's current stream on `device` (0 is the default
/// stream; E29 off CUDA).
///
/// ```
/// assert!(remat_runtime::diagnostics::device::current_stream(tch::Device::Cpu).is_err());
/// ```
pub fn current_stream(device: Device) -> Result<i64> {
    bridge::cuda_current_stream(cuda_index("current_stream", device)?)
}

/// Runs `f` with a stream from libtorch's pool as this thread's current
/// stream on `device` (its id passed to `f`), then makes the default stream
/// current again, also when `f` panics (E29 off CUDA).
///
/// ```
/// use remat_runtime::diagnostics::device::on_side_stream;
/// assert!(on_side_stream(tch::Device::Cpu, |_| ()).is_err());
/// ```
pub fn on_side_stream<R>(device: Device, f: impl FnOnce(i64) -> R) -> Result<R> {
    let i = cuda_index("on_side_stream", device)?;
    struct Back(i32);
    impl Drop for Back {
        fn drop(&mut self) {
            // Setting the default stream of a device that was just usable
            // cannot fail; a failure would surface on the next CUDA call.
            let _ = bridge::cuda_use_stream(self.0, false);
        }
    }
    let id = bridge::cuda_use_stream(i, true)?;
    let _back = Back(i);
    Ok(f(id))
}

/// libtorch's deterministic-algorithms switch (`torch.use_deterministic_algorithms`):
/// ops with a deterministic variant use it, the others raise. On CUDA it
/// makes, for example, embedding backward add in a fixed order; cuBLAS also
/// needs `CUBLAS_WORKSPACE_CONFIG=:4096:8` set before the process starts.
///
/// ```
/// remat_runtime::diagnostics::device::set_deterministic_algorithms(true).unwrap();
/// remat_runtime::diagnostics::device::set_deterministic_algorithms(false).unwrap();
/// ```
pub fn set_deterministic_algorithms(enabled: bool) -> Result<()> {
    bridge::set_deterministic_algorithms(enabled)
}
