//! Mixed precision for tch users: scoped autocast with the semantics of
//! `torch.autocast(device_type, dtype, enabled, cache_enabled)`, on every
//! device type libtorch has autocast for (CPU included) and with any dtype
//! it accepts (bf16 included).
//!
//! Why remat has its own: `tch::autocast(enabled, f)` switches CUDA's
//! autocast only, with its default dtype (fp16), and does nothing without
//! CUDA, so neither CPU nor bf16 autocast can be reached through tch. And a
//! checkpoint must recompute under the autocast state of its forward
//! (docs/semantics.md, rule A2), which needs that state read and restored
//! as a whole; both use the same entry and exit, here.
//!
//! Invariant: every level entered is left exactly once, restoring the state
//! it found (enabled and dtype of every device type, the cache flag), and
//! the nesting counter moves as torch.autocast's: the weight-cast cache is
//! cleared when the outermost level exits.

use crate::bridge::{
    available_devices, decrement_nesting, device_slot, increment_nesting, AutocastState,
};
use crate::error::{Error, Result};
use std::marker::PhantomData;
use tch::{Device, Kind};

/// Runs `f` with autocast on for `device`'s type in `dtype`
/// (`torch.autocast(device_type, dtype)`), restoring the previous state
/// however `f` ends, panics included.
///
/// Ops that autocast lists run in `dtype` (on CPU: `linear`, `matmul`,
/// convolutions, ... in `BFloat16` or `Half`); the rest keep their input
/// dtypes. A checkpoint started inside recomputes inside too, even when
/// backward is called outside (docs/mental-model.md, "What recomputation
/// restores").
///
/// # Panics
///
/// Where [`AutocastGuard::new`] returns an error: a device type without
/// autocast (Vulkan), or a dtype its autocast does not accept.
///
/// ```
/// use remat_runtime::autocast;
/// use tch::{kind::FLOAT_CPU, Device, Kind, Tensor};
///
/// let x = Tensor::ones([2, 3], FLOAT_CPU);
/// let w = Tensor::ones([4, 3], FLOAT_CPU);
/// let y = autocast(Device::Cpu, Kind::BFloat16, || x.linear::<Tensor>(&w, None));
/// assert_eq!(y.kind(), Kind::BFloat16);
/// assert_eq!(x.linear::<Tensor>(&w, None).kind(), Kind::Float); // off again
/// ```
pub fn autocast<R>(device: Device, dtype: Kind, f: impl FnOnce() -> R) -> R {
    let _guard = AutocastGuard::new(device, dtype).unwrap_or_else(|e| panic!("{e}"));
    f()
}

/// One autocast level, left when the guard is dropped: the guard form of
/// [`autocast`], and the whole of `torch.autocast` through
/// [`AutocastGuard::enter`].
///
/// The state is per thread, as libtorch's is: the guard must be dropped on
/// the thread that made it (it is not `Send`).
///
/// ```
/// use remat_runtime::AutocastGuard;
/// use tch::{kind::FLOAT_CPU, Device, Kind, Tensor};
///
/// let x = Tensor::ones([2, 3], FLOAT_CPU);
/// let w = Tensor::ones([4, 3], FLOAT_CPU);
/// {
///     let _bf16 = AutocastGuard::new(Device::Cpu, Kind::BFloat16).unwrap();
///     assert_eq!(x.linear::<Tensor>(&w, None).kind(), Kind::BFloat16);
///     {
///         // An fp32 island inside: `enabled = false`.
///         let _off = AutocastGuard::enter(Device::Cpu, None, false, None).unwrap();
///         assert_eq!(x.linear::<Tensor>(&w, None).kind(), Kind::Float);
///     }
///     assert_eq!(x.linear::<Tensor>(&w, None).kind(), Kind::BFloat16);
/// }
/// assert_eq!(x.linear::<Tensor>(&w, None).kind(), Kind::Float);
/// ```
#[derive(Debug)]
#[must_use = "autocast is left when the guard is dropped"]
pub struct AutocastGuard {
    _entered: Entered,
    _not_send: PhantomData<*const ()>,
}

impl AutocastGuard {
    /// Autocast on for `device`'s type in `dtype`, the weight-cast cache as
    /// it was (`torch.autocast(device_type, dtype)`).
    ///
    /// ```
    /// use remat_runtime::AutocastGuard;
    /// use tch::{Device, Kind};
    /// let err = AutocastGuard::new(Device::Cpu, Kind::Int).unwrap_err();
    /// assert!(err.to_string().contains("BFloat16"));
    /// ```
    pub fn new(device: Device, dtype: Kind) -> Result<Self> {
        Self::enter(device, Some(dtype), true, None)
    }

    /// `torch.autocast(device_type, dtype, enabled, cache_enabled)`: `dtype`
    /// `None` keeps the type's current autocast dtype, `cache_enabled`
    /// `None` keeps the current cache flag. `enabled = false` is an island
    /// without autocast for that type inside an autocast scope.
    ///
    /// ```
    /// use remat_runtime::AutocastGuard;
    /// use tch::{Device, Kind};
    /// let _g = AutocastGuard::enter(Device::Cpu, Some(Kind::Half), true, Some(false)).unwrap();
    /// assert!(AutocastGuard::enter(Device::Vulkan, None, true, None).is_err());
    /// ```
    pub fn enter(
        device: Device,
        dtype: Option<Kind>,
        enabled: bool,
        cache_enabled: Option<bool>,
    ) -> Result<Self> {
        let now = AutocastState::current()?;
        let slot = device_slot(device)
            .filter(|&s| now.available(s))
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "autocast: libtorch has no autocast for {device:?}; it has it for {}",
                    available_devices(&now).join(", ")
                ))
            })?;
        let dtype = match dtype {
            Some(kind) => kind,
            None => now.dtype(slot).unwrap_or(Kind::BFloat16),
        };
        if enabled {
            check_dtype(device, dtype)?;
        }
        let target = now.with(
            slot,
            enabled,
            dtype,
            cache_enabled.unwrap_or(now.cache_enabled()),
        );
        Ok(AutocastGuard {
            _entered: Entered::enter(now, target)?,
            _not_send: PhantomData,
        })
    }
}

impl AutocastGuard {
    /// The autocast dtype of `device`'s type on this thread when autocast
    /// is on for it, `None` when it is off (or the type has no autocast):
    /// what `torch.is_autocast_enabled(device_type)` and
    /// `torch.get_autocast_dtype(device_type)` tell together.
    ///
    /// ```
    /// use remat_runtime::{autocast, AutocastGuard};
    /// use tch::{Device, Kind};
    /// assert_eq!(AutocastGuard::current(Device::Cpu), None);
    /// autocast(Device::Cpu, Kind::BFloat16, || {
    ///     assert_eq!(AutocastGuard::current(Device::Cpu), Some(Kind::BFloat16));
    /// });
    /// ```
    pub fn current(device: Device) -> Option<Kind> {
        let now = AutocastState::current().ok()?;
        let slot = device_slot(device)?;
        now.enabled(slot).then(|| now.dtype(slot)).flatten()
    }

    /// Whether casts of weights are cached inside autocast on this thread
    /// (`torch.is_autocast_cache_enabled()`).
    ///
    /// ```
    /// use remat_runtime::AutocastGuard;
    /// use tch::{Device, Kind};
    /// let before = AutocastGuard::cache_enabled();
    /// {
    ///     let _g = AutocastGuard::enter(Device::Cpu, Some(Kind::BFloat16), true, Some(!before));
    ///     assert_eq!(AutocastGuard::cache_enabled(), !before);
    /// }
    /// assert_eq!(AutocastGuard::cache_enabled(), before);
    /// ```
    pub fn cache_enabled() -> bool {
        AutocastState::current().is_ok_and(|s| s.cache_enabled())
    }
}

/// The dtypes each device type's autocast accepts (what torch.autocast
/// allows; it warns and disables for others, remat refuses).
fn check_dtype(device: Device, dtype: Kind) -> Result<()> {
    let allowed: &[Kind] = match device {
        Device::Cpu | Device::Cuda(_) | Device::Mps => &[Kind::BFloat16, Kind::Half],
        Device::Vulkan => &[],
    };
    if allowed.contains(&dtype) {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "autocast on {device:?} runs in {}, not {dtype:?}",
        allowed
            .iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(" or ")
    )))
}

/// One entered level: the state it replaced, restored on drop.
#[derive(Debug)]
pub(crate) struct Entered {
    previous: AutocastState,
}

impl Entered {
    /// Enters `target` over `previous` (the thread's state now).
    pub(crate) fn enter(previous: AutocastState, target: AutocastState) -> Result<Self> {
        target.set()?;
        increment_nesting();
        Ok(Entered { previous })
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        // Neither call can fail for the device types `current` reported
        // available (libtorch only throws for unknown types); a drop has no
        // way to report one anyway.
        let _ = decrement_nesting();
        let _ = self.previous.set();
    }
}
