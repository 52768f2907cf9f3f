//! State hooks: state that replay must see as the forward saw it (an RNG,
//! a counter), snapshotted and restored around replay.
//!
//! Invariant: restores are absolute (a snapshot, never a delta), so a
//! restore can be repeated and undone by restoring another snapshot.
//!
//! docs/semantics.md rules kept here: H1 (absolute restores), H4 (untracked
//! restores), H5 (failing hooks), H6 (`RngStateHook`); where snapshots are
//! taken and restored (H2, H3) is `checkpoint`, `save_region` and
//! `recompute`.

use crate::bridge::{rng_state, set_rng_state, UntrackedGuard};
use crate::error::{catch_quietly, panic_message};
use std::any::Any;
use std::sync::Arc;
use tch::{Device, Tensor};

/// Snapshots and restores state (an RNG, a counter) around replay, so that
/// replay draws what the forward drew.
///
/// With hooks registered on a checkpoint: snapshot at checkpoint entry and
/// after each `Save` region on the forward; at replay start the outer state is
/// snapshotted and the entry snapshot restored; a skipped `Save` region
/// restores its exit snapshot; at replay end the outer state is restored, so
/// replay's draws never leak into the rest of backward. Restores are absolute.
///
/// ```
/// use remat_runtime::RecomputeStateHook;
/// use std::any::Any;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// struct Counter(AtomicU64);
///
/// impl RecomputeStateHook for Counter {
///     fn snapshot(&self) -> Box<dyn Any + Send> {
///         Box::new(self.0.load(Ordering::SeqCst))
///     }
///     fn restore(&self, snapshot: &(dyn Any + Send)) {
///         self.0.store(*snapshot.downcast_ref::<u64>().unwrap(), Ordering::SeqCst);
///     }
/// }
/// ```
pub trait RecomputeStateHook: Send + Sync + 'static {
    /// The current state.
    fn snapshot(&self) -> Box<dyn Any + Send>;
    /// Sets the state to a snapshot this hook took.
    fn restore(&self, snapshot: &(dyn Any + Send));
}

pub(crate) type Snapshots = Vec<Box<dyn Any + Send>>;

/// Every hook's snapshot; a hook that panics is an error (the message).
pub(crate) fn snapshot_all(hooks: &[Arc<dyn RecomputeStateHook>]) -> Result<Snapshots, String> {
    hooks
        .iter()
        .map(|h| {
            catch_quietly(|| h.snapshot())
                .map_err(|p| format!("a state hook's snapshot panicked: {}", panic_message(&*p)))
        })
        .collect()
}

/// Restores run untracked: their in-place writes bump no version counter, so
/// a tensor a `Save` region kept (a batch norm's running mean) still passes
/// the in-place check after replay restored it (see `UntrackedGuard`).
///
/// A hook that panics is an error (the first one's message); the other
/// hooks are still restored, so that as much state as possible is right.
pub(crate) fn restore_all(
    hooks: &[Arc<dyn RecomputeStateHook>],
    snaps: &[Box<dyn Any + Send>],
) -> Result<(), String> {
    // docs/semantics.md, rule H4.
    let _untracked = UntrackedGuard::new();
    let mut first = None;
    for (h, s) in hooks.iter().zip(snaps) {
        if let Err(p) = catch_quietly(|| h.restore(&**s)) {
            first.get_or_insert_with(|| {
                format!("a state hook's restore panicked: {}", panic_message(&*p))
            });
        }
    }
    first.map_or(Ok(()), Err)
}

/// Restores a snapshot when dropped (also when unwinding), or when
/// [`RestoreOnDrop::finish`] asks and wants to hear of a failure.
pub(crate) struct RestoreOnDrop<'a> {
    hooks: &'a [Arc<dyn RecomputeStateHook>],
    snapshots: Option<Snapshots>,
}

impl<'a> RestoreOnDrop<'a> {
    pub(crate) fn new(hooks: &'a [Arc<dyn RecomputeStateHook>], snapshots: Snapshots) -> Self {
        RestoreOnDrop {
            hooks,
            snapshots: Some(snapshots),
        }
    }

    /// Restores now, reporting a hook's failure.
    pub(crate) fn finish(mut self) -> Result<(), String> {
        match self.snapshots.take() {
            Some(s) => restore_all(self.hooks, &s),
            None => Ok(()),
        }
    }
}

impl Drop for RestoreOnDrop<'_> {
    fn drop(&mut self) {
        // On an error path: the failure being reported already says what
        // went wrong; a hook's panic here must not abort the process.
        if let Some(s) = self.snapshots.take() {
            let _ = restore_all(self.hooks, &s);
        }
    }
}

/// The stock state hook: libtorch's default random generators, so that
/// dropout and other random ops draw the same numbers on replay as on the
/// forward (and the rest of backward is not disturbed by replay's draws).
///
/// Every checkpoint already keeps the default generators for its
/// recomputation (docs/semantics.md, rule C14); this hook is for a
/// checkpoint that opted out of that (`preserve_rng_state(false)`) and
/// wants some of them kept, or for naming the devices. Cost per snapshot
/// (at checkpoint entry and after each `Save` region, and twice per
/// replay): one copy of the CPU generator state (about 5 KB, a few
/// microseconds) and, per CUDA device, its seed and offset (16 bytes, no
/// device sync).
///
/// ```
/// use remat_runtime::{checkpoint, RngStateHook};
/// let x = tch::Tensor::ones([8], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("drop")
///     .preserve_rng_state(false)
///     .state_hook(RngStateHook::cpu())
///     .call(&x, |x| x.dropout(0.5, true));
/// ```
#[derive(Clone, Debug)]
pub struct RngStateHook {
    devices: Vec<Device>,
}

impl RngStateHook {
    /// The CPU generator only.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, RngStateHook};
    /// let x = tch::Tensor::ones([64], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("drop")
    ///     .preserve_rng_state(false)
    ///     .state_hook(RngStateHook::cpu())
    ///     .call(&x, |x| x.dropout(0.5, true));
    /// y.sum(tch::Kind::Float).backward();
    /// // Replay drew the forward's mask: the gradient is zero exactly where `y` is.
    /// assert!(x.grad().ne(0.0).equal(&y.ne(0.0)));
    /// ```
    pub fn cpu() -> Self {
        RngStateHook {
            devices: vec![Device::Cpu],
        }
    }

    /// The CPU generator and the generator of every visible CUDA device.
    ///
    /// ```
    /// use remat_runtime::{RecomputeStateHook, RngStateHook};
    /// use tch::{kind::FLOAT_CPU, Tensor};
    /// let hook = RngStateHook::all();
    /// let snapshot = hook.snapshot();
    /// let first = Tensor::rand([3], FLOAT_CPU);
    /// hook.restore(&*snapshot); // what replay does
    /// assert!(first.equal(&Tensor::rand([3], FLOAT_CPU)));
    /// ```
    pub fn all() -> Self {
        let mut devices = vec![Device::Cpu];
        devices.extend((0..tch::Cuda::device_count() as usize).map(Device::Cuda));
        RngStateHook { devices }
    }

    /// The generators of exactly these devices.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, RngStateHook};
    /// use tch::Device;
    /// // On a GPU machine, e.g. `[Device::Cpu, Device::Cuda(0)]`.
    /// let hook = RngStateHook::devices([Device::Cpu]);
    /// let x = tch::Tensor::ones([8], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("drop")
    ///     .preserve_rng_state(false)
    ///     .state_hook(hook)
    ///     .call(&x, |x| x.dropout(0.5, true));
    /// y.sum(tch::Kind::Float).backward();
    /// assert!(x.grad().ne(0.0).equal(&y.ne(0.0)));
    /// ```
    pub fn devices(devices: impl IntoIterator<Item = Device>) -> Self {
        RngStateHook {
            devices: devices.into_iter().collect(),
        }
    }
}

impl RecomputeStateHook for RngStateHook {
    fn snapshot(&self) -> Box<dyn Any + Send> {
        let states: Vec<Tensor> = self
            .devices
            .iter()
            .map(|&d| {
                rng_state(d).unwrap_or_else(|e| panic!("cannot read the {d:?} generator: {e}"))
            })
            .collect();
        Box::new(states)
    }

    fn restore(&self, snapshot: &(dyn Any + Send)) {
        let states = snapshot
            .downcast_ref::<Vec<Tensor>>()
            .expect("an RngStateHook snapshot");
        for (&d, s) in self.devices.iter().zip(states) {
            set_rng_state(d, s)
                .unwrap_or_else(|e| panic!("cannot restore the {d:?} generator: {e}"));
        }
    }
}
