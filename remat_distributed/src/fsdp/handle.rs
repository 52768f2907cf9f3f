//! A handle to one unit, for a checkpoint's closure to own, and the state
//! it shares with its `FullyShardedDataParallel` (docs/semantics.md, rules
//! F3, F4).

use super::unit::UnitOutput;
use crate::bridge;
use crate::error::{Error, Result};
use std::sync::Arc;

/// What the model and every [`UnitHandle`] share.
pub(super) struct Core {
    pub(super) raw: bridge::Fsdp,
    pub(super) rank: usize,
    pub(super) world_size: usize,
    pub(super) timeout: std::time::Duration,
}

/// One unit of a [`FullyShardedDataParallel`](super::FullyShardedDataParallel), to run its forward from a
/// checkpoint's closure (which must own what it uses: a handle is `Send`,
/// `'static` and cheap to clone). Built by
/// [`FullyShardedDataParallel::handle`](super::FullyShardedDataParallel::handle).
///
/// ```
/// use remat_distributed::{FsdpOptions, FullyShardedDataParallel, InitOptions, ProcessGroup};
/// use tch::{nn, nn::Module, Device, Kind, Tensor};
/// let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
/// let group = ProcessGroup::init(&InitOptions::new(0, 1, "127.0.0.1", port)).unwrap();
/// let vs = nn::VarStore::new(Device::Cpu);
/// let layer = nn::linear(vs.root() / "fc", 4, 4, Default::default());
/// let fsdp = FullyShardedDataParallel::from_var_store(&group, &vs, &["fc"], FsdpOptions::default()).unwrap();
/// let unit = fsdp.handle("fc").unwrap();
/// let x = Tensor::ones([2, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
/// // The unit inside a checkpoint: its recomputation gathers it (rule F4).
/// let y = remat::checkpoint("fc").call(&x, move |x| unit.forward(|| layer.forward(&x).relu()).unwrap());
/// fsdp.backward(&y.sum(Kind::Float)).unwrap();
/// assert_eq!(x.grad().size(), [2, 4]);
/// ```
#[derive(Clone)]
pub struct UnitHandle {
    pub(super) core: Arc<Core>,
    pub(super) index: usize,
    pub(super) name: Arc<str>,
}

impl UnitHandle {
    /// Runs the unit's forward `f`, as [`FullyShardedDataParallel::unit`](super::FullyShardedDataParallel::unit).
    pub fn forward<O: UnitOutput>(&self, f: impl FnOnce() -> O) -> Result<O> {
        let recomputing = remat_runtime::is_recomputing();
        let name = &self.name;
        self.core
            .raw
            .pre_forward(self.index, recomputing)
            .map_err(|e| self.core.failed(&format!("the gather of unit `{name}`"), e))?;
        let out = f();
        self.core
            .raw
            .post_forward(self.index, &out.tensors(), recomputing)
            .map_err(|e| {
                self.core
                    .failed(&format!("the end of unit `{name}`'s forward"), e)
            })?;
        Ok(out)
    }

    /// The unit's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Core {
    pub(super) fn failed(&self, what: &str, cause: String) -> Error {
        if crate::ddp::is_communication(&cause) {
            self.lost_peer(what, &cause)
        } else {
            Error::Config(cause)
        }
    }

    pub(super) fn lost_peer(&self, what: &str, cause: &str) -> Error {
        Error::Collective(format!(
            "{what} on rank {} of {} failed: {cause}. A peer has left or stopped answering \
             within the timeout ({:?}): stop this rank, and look at the other ranks' output \
             for the first error (docs/semantics.md, rule W8)",
            self.rank, self.world_size, self.timeout
        ))
    }
}
