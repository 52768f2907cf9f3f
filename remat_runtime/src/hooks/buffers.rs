//! The stock state hook for module buffers: named tensors (a batch norm's
//! running statistics, a step counter kept as a tensor) that the forward
//! updates in place, snapshotted at checkpoint entry and restored around
//! replay.
//!
//! Invariant: a snapshot is a copy of every buffer's values (never an alias),
//! taken and restored in the order the buffers were given; restores write
//! into the buffers themselves (in place), so every handle to a buffer, the
//! model's own included, sees the restored values (docs/semantics.md, rule
//! H6).

use crate::hooks::state_hooks::RecomputeStateHook;
use crate::sync::lock;
use std::any::Any;
use std::sync::Mutex;
use tch::Tensor;

/// Snapshots and restores named tensors around replay, so that replay reads
/// the buffers as the forward read them and, at its end, the forward's
/// updates are put back: after backward each buffer holds exactly what the
/// same model without checkpointing holds.
///
/// A checkpointed module that updates a buffer on its forward (tch's
/// `BatchNorm` in train mode updates its running mean and variance) would
/// otherwise update it again on replay. Register this hook on that
/// checkpoint with the buffers its closure updates (runtime API:
/// [`Checkpoint::state_hook`](crate::Checkpoint::state_hook); macros:
/// `#[checkpoint(state_hooks = [...])]`). The runtime runs restores
/// untracked: they bump no version counter, so they never trip the in-place
/// checks of saved tensors. Cost: one copy of the buffers at checkpoint entry
/// and after each `Save` region, and two per replay.
///
/// ```
/// use remat_runtime::{checkpoint, BufferStateHook};
/// use tch::{kind::FLOAT_CPU, Kind, Tensor};
///
/// // A module buffer the closure updates in place, as a batch norm does.
/// let calls = Tensor::zeros([1], FLOAT_CPU);
/// let x = Tensor::ones([3], FLOAT_CPU).set_requires_grad(true);
/// let buffer = calls.shallow_clone();
/// let y = checkpoint("block")
///     .state_hook(BufferStateHook::new([("calls", &calls)]))
///     .call(&x, move |x| {
///         let mut handle = buffer.shallow_clone(); // in-place ops take `&mut`
///         let _ = tch::no_grad(|| handle.f_add_scalar_(1.0));
///         x.sin()
///     });
/// y.sum(Kind::Float).backward(); // replays the closure
/// assert_eq!(f32::try_from(&calls).unwrap(), 1.0); // counted once, as without remat
/// ```
#[derive(Debug)]
pub struct BufferStateHook {
    buffers: Mutex<Vec<(String, Tensor)>>,
}

impl BufferStateHook {
    /// A hook over these named tensors (shallow handles: the hook restores
    /// the tensors themselves).
    ///
    /// ```
    /// use remat_runtime::BufferStateHook;
    /// let mean = tch::Tensor::zeros([4], tch::kind::FLOAT_CPU);
    /// let hook = BufferStateHook::new([("bn.running_mean", &mean)]);
    /// assert_eq!(hook.names(), ["bn.running_mean"]);
    /// ```
    pub fn new<'a, S: Into<String>>(buffers: impl IntoIterator<Item = (S, &'a Tensor)>) -> Self {
        BufferStateHook {
            buffers: Mutex::new(
                buffers
                    .into_iter()
                    .map(|(name, t)| (name.into(), t.shallow_clone()))
                    .collect(),
            ),
        }
    }

    /// The buffers of a `VarStore` (its variables that do not require grad,
    /// such as running statistics) whose names start with `prefix` (`""`:
    /// all), in name order.
    ///
    /// ```
    /// use remat_runtime::{nn, BufferStateHook};
    /// let vs = nn::VarStore::new(tch::Device::Cpu);
    /// let _bn = nn::batch_norm2d(vs.root() / "layer1" / "bn", 8, Default::default());
    /// let hook = BufferStateHook::from_var_store(&vs, "layer1");
    /// assert_eq!(hook.names(), ["layer1.bn.running_mean", "layer1.bn.running_var"]);
    /// ```
    pub fn from_var_store(vs: &tch::nn::VarStore, prefix: &str) -> Self {
        let mut buffers: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(name, t)| name.starts_with(prefix) && !t.requires_grad())
            .collect();
        buffers.sort_by(|a, b| a.0.cmp(&b.0));
        BufferStateHook {
            buffers: Mutex::new(buffers),
        }
    }

    /// The names of the buffers, in snapshot order.
    ///
    /// ```
    /// let hook = remat_runtime::BufferStateHook::new(Vec::<(String, &tch::Tensor)>::new());
    /// assert!(hook.names().is_empty());
    /// ```
    pub fn names(&self) -> Vec<String> {
        lock(&self.buffers).iter().map(|(n, _)| n.clone()).collect()
    }
}

impl RecomputeStateHook for BufferStateHook {
    fn snapshot(&self) -> Box<dyn Any + Send> {
        let copies: Vec<Tensor> = tch::no_grad(|| {
            lock(&self.buffers)
                .iter()
                .map(|(_, t)| t.detach().copy())
                .collect()
        });
        Box::new(copies)
    }

    fn restore(&self, snapshot: &(dyn Any + Send)) {
        let copies = snapshot
            .downcast_ref::<Vec<Tensor>>()
            .expect("a BufferStateHook snapshot");
        tch::no_grad(|| {
            for ((name, t), s) in lock(&self.buffers).iter_mut().zip(copies) {
                if let Err(e) = t.f_copy_(s) {
                    panic!("cannot restore buffer `{name}` for replay: {e}");
                }
            }
        });
    }
}
