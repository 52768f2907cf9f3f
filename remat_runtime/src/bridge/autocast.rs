//! The calling thread's autocast state (libtorch's `at::autocast`): for
//! every device type libtorch has autocast for, whether it is on and its
//! dtype, plus the weight-cast cache flag, read and written in one crossing;
//! and the nesting counter that decides when the cast cache is cleared.
//!
//! Invariant: `AutocastState::set` writes exactly what `current` read
//! (device types this libtorch lacks are left alone), so restoring a
//! snapshot is absolute.

use super::check;
use super::ffi::{self, RawAutocast, AUTOCAST_DEVICES};
use super::kind_code::{kind_of_code, scalar_type};
use crate::error::Result;
use tch::{Device, Kind};

/// The device types of bridge.h's `remat_autocast_state`, in its order,
/// with the names `torch.autocast` uses for them.
const DEVICE_NAMES: [&str; AUTOCAST_DEVICES] = [
    "cpu",
    "cuda",
    "xpu",
    "mps",
    "hpu",
    "xla",
    "privateuseone",
    "ipu",
    "mtia",
    "maia",
];

/// Where `device`'s type sits in the state's arrays, if tch can name one
/// that has autocast.
pub(crate) fn device_slot(device: Device) -> Option<usize> {
    match device {
        Device::Cpu => Some(0),
        Device::Cuda(_) => Some(1),
        Device::Mps => Some(3),
        Device::Vulkan => None,
    }
}

/// A snapshot of the thread's autocast state.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct AutocastState(RawAutocast);

impl AutocastState {
    /// The calling thread's state now.
    pub(crate) fn current() -> Result<Self> {
        let mut raw = RawAutocast::default();
        // SAFETY: `raw` is a valid out-pointer of the declared layout.
        check(unsafe { ffi::remat_autocast_get(&mut raw) })?;
        Ok(AutocastState(raw))
    }

    /// Makes this the calling thread's state (the nesting counter aside).
    pub(crate) fn set(&self) -> Result<()> {
        // SAFETY: `self.0` is a valid state of the declared layout.
        check(unsafe { ffi::remat_autocast_set(&self.0) })
    }

    /// Whether autocast is on for the type in `slot`.
    pub(crate) fn enabled(&self, slot: usize) -> bool {
        self.0.enabled[slot] != 0
    }

    /// Whether this libtorch has autocast for the type in `slot`.
    pub(crate) fn available(&self, slot: usize) -> bool {
        self.0.available[slot] != 0
    }

    /// The autocast dtype of the type in `slot` (on or not).
    pub(crate) fn dtype(&self, slot: usize) -> Option<Kind> {
        kind_of_code(self.0.dtype[slot].into())
    }

    /// Whether casts of weights are cached inside autocast.
    pub(crate) fn cache_enabled(&self) -> bool {
        self.0.cache_enabled != 0
    }

    /// This state with the type in `slot` switched as given.
    pub(crate) fn with(mut self, slot: usize, enabled: bool, dtype: Kind, cache: bool) -> Self {
        self.0.enabled[slot] = enabled as u8;
        self.0.dtype[slot] = scalar_type(dtype) as i8;
        self.0.cache_enabled = cache as u8;
        self
    }

    /// How messages describe the state: `autocast off`, or the device types
    /// it is on for with their dtypes (`autocast on for cpu (BFloat16)`).
    pub(crate) fn describe(&self) -> String {
        let on: Vec<String> = (0..AUTOCAST_DEVICES)
            .filter(|&i| self.0.enabled[i] != 0)
            .map(|i| match self.dtype(i) {
                Some(kind) => format!("{} ({kind:?})", DEVICE_NAMES[i]),
                None => DEVICE_NAMES[i].to_string(),
            })
            .collect();
        if on.is_empty() {
            "autocast off".into()
        } else {
            format!("autocast on for {}", on.join(", "))
        }
    }
}

/// The names of the device types this libtorch has autocast for.
pub(crate) fn available_devices(state: &AutocastState) -> Vec<&'static str> {
    (0..AUTOCAST_DEVICES)
        .filter(|&i| state.available(i))
        .map(|i| DEVICE_NAMES[i])
        .collect()
}

/// One more autocast level on this thread (as `torch.autocast.__enter__`).
pub(crate) fn increment_nesting() {
    // SAFETY: moves a thread-local counter.
    unsafe { ffi::remat_autocast_increment_nesting() };
}

/// One level less; clears the weight-cast cache when the outermost level
/// exits (as `torch.autocast.__exit__`).
pub(crate) fn decrement_nesting() -> Result<()> {
    // SAFETY: moves a thread-local counter.
    if unsafe { ffi::remat_autocast_decrement_nesting() } == 0 {
        // SAFETY: clears a thread-local cache.
        check(unsafe { ffi::remat_autocast_clear_cache() })?;
    }
    Ok(())
}
