//! Fully sharded data parallel over c10d's all-gather and reduce-scatter
//! (docs/semantics.md, section F; docs/distributed.md, "Sharded data
//! parallel"): units of parameters sharded across the ranks, gathered
//! around their forward and backward, their gradients reduce-scattered
//! into the shards.

mod handle;
mod options;
mod state_dict;
mod stats;
mod unit;

pub use handle::UnitHandle;
pub use options::FsdpOptions;
pub use stats::{FsdpEvent, FsdpEventKind, FsdpStats};
pub use unit::{Unit, UnitOutput};

use crate::bridge;
use crate::error::{Error, Result};
use crate::group::ProcessGroup;
use handle::Core;
use std::collections::HashMap;
use std::sync::Arc;
use tch::{nn, Tensor};

/// What the runtime keeps of a unit.
struct UnitInfo {
    name: String,
    params: Vec<(String, Vec<i64>)>,
    padded: i64,
    kind: tch::Kind,
    device: tch::Device,
    /// This rank's shard, the variable of `shards` for the unit.
    shard: Tensor,
}

/// Trains a model whose parameters are split across the ranks: each rank
/// holds `1 / world` of every unit's parameters (its shard), of their
/// gradients and of the optimizer's state; a unit's parameters are
/// all-gathered just before its forward and again before its backward (or
/// before a checkpoint inside it recomputes), and its gradients are
/// reduce-scattered into the shards as its backward ends
/// (docs/semantics.md, rules F1-F9).
///
/// The model keeps its own parameter tensors: between uses they are empty
/// (`size() == [0]`) and hold no bytes. The optimizer steps
/// [`shards`](Self::shards), a `VarStore` of one variable per unit.
/// Dropping this leaves them empty: take
/// [`full_state_dict`](Self::full_state_dict) first to keep the values.
/// A backward that failed leaves this rank unable to go on with its step;
/// the next forward forgets what that backward had half done.
///
/// ```
/// use remat_distributed::{FsdpOptions, FullyShardedDataParallel, InitOptions, ProcessGroup, Unit};
/// use tch::{nn, nn::Module, nn::OptimizerConfig, Device, Kind, Tensor};
/// let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
/// let group = ProcessGroup::init(&InitOptions::new(0, 1, "127.0.0.1", port)).unwrap();
/// let vs = nn::VarStore::new(Device::Cpu);
/// let layer = nn::linear(vs.root() / "fc", 4, 2, Default::default());
/// let fsdp = FullyShardedDataParallel::from_var_store(&group, &vs, &["fc"], FsdpOptions::default()).unwrap();
/// let mut opt = nn::Sgd::default().build(fsdp.shards(), 0.1).unwrap();
/// let x = Tensor::ones([3, 4], (Kind::Float, Device::Cpu));
/// let y = fsdp.unit("fc", || layer.forward(&x)).unwrap();
/// assert_eq!(layer.ws.size(), [0]); // freed once the unit's forward ended
/// fsdp.backward(&y.sum(Kind::Float)).unwrap();
/// opt.step();
/// ```
pub struct FullyShardedDataParallel {
    core: Arc<Core>,
    units: Vec<UnitInfo>,
    by_name: HashMap<String, usize>,
    shards: nn::VarStore,
}

impl FullyShardedDataParallel {
    /// Shards `units` (the same list, in the same order, on every rank):
    /// broadcasts each unit's values from rank 0, keeps this rank's slice
    /// of each as a variable of [`shards`](Self::shards), and frees the
    /// parameters' bytes (rules F1, F2).
    pub fn new(
        group: &ProcessGroup,
        units: Vec<Unit>,
        options: FsdpOptions,
    ) -> Result<FullyShardedDataParallel> {
        if units.is_empty() {
            return Err(Error::Config(
                "FullyShardedDataParallel over no units: pass at least one Unit".into(),
            ));
        }
        let raw = bridge::Fsdp::new(
            group.raw(),
            options.reshard_after_forward,
            options.prefetch,
            options.rank_ordered_reduce,
        )
        .map_err(Error::Config)?;
        let world = group.world_size() as i64;
        let device = units[0]
            .params
            .first()
            .map(|(_, t)| t.device())
            .unwrap_or(tch::Device::Cpu);
        let shard_device = if options.offload_shards {
            tch::Device::Cpu
        } else {
            device
        };
        let shards = nn::VarStore::new(shard_device);
        unit::check_units(&units)?;
        for (what, kind) in [
            ("param_dtype", options.param_dtype),
            ("reduce_dtype", options.reduce_dtype),
        ] {
            if let Some(kind) = kind {
                bridge::floating_code(kind)
                    .map_err(|e| Error::Config(format!("FsdpOptions::{what}: {e}")))?;
            }
        }
        let mut infos = Vec::new();
        let mut by_name = HashMap::new();
        for unit in units {
            let first = &unit.params[0].1;
            let total: i64 = unit.params.iter().map(|(_, p)| p.numel() as i64).sum();
            let shard_len = (total + world - 1) / world;
            let kind = first.kind();
            let shard = shard_var(&shards, &unit.name, shard_len, kind, shard_device);
            let names: Vec<String> = unit.params.iter().map(|(n, _)| n.clone()).collect();
            let refs: Vec<&Tensor> = unit.params.iter().map(|(_, t)| t).collect();
            let shapes: Vec<(String, Vec<i64>)> = unit
                .params
                .iter()
                .map(|(n, t)| (n.clone(), t.size()))
                .collect();
            let index = raw
                .add_unit(
                    &unit.name,
                    &names,
                    &refs,
                    &shard,
                    options.param_dtype,
                    options.reduce_dtype,
                )
                .map_err(|e| collective_or_config(group, "sharding a unit", e))?;
            by_name.insert(unit.name.clone(), index);
            infos.push(UnitInfo {
                name: unit.name,
                params: shapes,
                padded: shard_len * world,
                kind,
                device: shard_device,
                shard: shard.shallow_clone(),
            });
        }
        Ok(FullyShardedDataParallel {
            core: Arc::new(Core {
                raw,
                rank: group.rank(),
                world_size: group.world_size(),
                timeout: group.options().timeout,
            }),
            units: infos,
            by_name,
            shards,
        })
    }

    /// Over a `VarStore`'s trainable variables: one unit per prefix in
    /// `units` (the variables named `{prefix}.…`), in that order, then a
    /// unit named `root` for the variables no prefix takes, if any.
    pub fn from_var_store(
        group: &ProcessGroup,
        vs: &nn::VarStore,
        units: &[&str],
        options: FsdpOptions,
    ) -> Result<FullyShardedDataParallel> {
        let mut named = crate::var_store::trainable_by_name(vs);
        let mut out = Vec::new();
        for prefix in units {
            let dotted = format!("{prefix}.");
            let (mine, rest): (Vec<_>, Vec<_>) = named
                .into_iter()
                .partition(|(n, _)| n.starts_with(&dotted) || n == prefix);
            named = rest;
            if mine.is_empty() {
                return Err(Error::Config(format!(
                    "no trainable variable is named `{prefix}.…`: name units after the \
                     VarStore's paths"
                )));
            }
            out.push(Unit::new(*prefix, mine));
        }
        if !named.is_empty() {
            out.push(Unit::new("root", named));
        }
        FullyShardedDataParallel::new(group, out, options)
    }

    /// Runs unit `name`'s forward `f`: its parameters are gathered before
    /// (and the next unit's gather started), freed after unless options
    /// keep them, and the gradients of what `f` returns gather them again
    /// for the backward (rule F3). Inside a checkpoint's recomputation it
    /// gathers if needed and keeps the parameters for the backward that
    /// follows, so one gather serves both (rule F4).
    pub fn unit<O: UnitOutput>(&self, name: &str, f: impl FnOnce() -> O) -> Result<O> {
        self.handle(name)?.forward(f)
    }

    /// A handle to unit `name`, to run its forward where `self` cannot be
    /// borrowed (a checkpoint's closure).
    pub fn handle(&self, name: &str) -> Result<UnitHandle> {
        let index = self.index_of(name)?;
        Ok(UnitHandle {
            core: Arc::clone(&self.core),
            index,
            name: Arc::from(name),
        })
    }

    /// Runs backward from `loss`, during which each unit is gathered again,
    /// its gradients reduce-scattered into its shard's gradient (the mean
    /// over the ranks, as data parallel's) and freed (rules F4, F5). A
    /// collective that fails is [`Error::Collective`] naming this rank,
    /// the world and the timeout; any other failure is [`Error::Backward`].
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        remat_runtime::autograd::backward_with(loss, false).map_err(|e| {
            let message = e.to_string();
            if crate::ddp::is_communication(&message) {
                self.core
                    .lost_peer("a gather or reduce-scatter in backward", &message)
            } else {
                Error::Backward(message)
            }
        })
    }

    /// This rank's shards, one trainable variable per unit (named after
    /// it): what an optimizer steps, for instance
    /// `nn::AdamW::default().build(fsdp.shards(), lr)`.
    pub fn shards(&self) -> &nn::VarStore {
        &self.shards
    }

    /// The events of the last step (from its first unit's forward on):
    /// gathers launched and done, forwards, backwards, reduce-scatters
    /// (rule F7).
    pub fn last_step(&self) -> Result<FsdpStats> {
        let raw = self.core.raw.events().map_err(Error::Collective)?;
        let events = raw
            .into_iter()
            .filter_map(|[kind, unit, ns]| {
                Some(FsdpEvent {
                    kind: FsdpEventKind::from_code(kind)?,
                    unit: self.units.get(unit as usize)?.name.clone(),
                    at: std::time::Duration::from_nanos(ns.max(0) as u64),
                })
            })
            .collect();
        Ok(FsdpStats { events })
    }

    /// The bytes the units' gathered parameters hold now (zero between
    /// steps with `reshard_after_forward`).
    pub fn gathered_bytes(&self) -> Result<usize> {
        Ok(self.core.raw.gathered_bytes().map_err(Error::Collective)?.0)
    }

    /// The most bytes of gathered parameters held at once during the last
    /// backward: the unit in backward, the one prefetched and any unit
    /// around them (a root unit). While a checkpoint inside a unit
    /// recomputes, these parameters are alive beside what it rebuilds, so
    /// a plan for a sharded model counts them: set
    /// [`Profile::gathered_bytes`](remat_runtime::planner::Profile::gathered_bytes) to this after a
    /// step (rule F9).
    pub fn backward_gathered_peak(&self) -> Result<usize> {
        Ok(self.core.raw.gathered_bytes().map_err(Error::Collective)?.1)
    }

    /// The units' names, in order.
    pub fn units(&self) -> Vec<&str> {
        self.units.iter().map(|u| u.name.as_str()).collect()
    }

    /// Unit `name`'s shard, this rank's slice of its flattened parameters
    /// (padded with zeros to a multiple of the world size): the variable of
    /// [`shards`](Self::shards) named after it.
    pub fn shard(&self, name: &str) -> Result<Tensor> {
        let index = self.index_of(name)?;
        Ok(self.units[index].shard.shallow_clone())
    }

    fn index_of(&self, name: &str) -> Result<usize> {
        self.by_name.get(name).copied().ok_or_else(|| {
            let known: Vec<&str> = self.units.iter().map(|u| u.name.as_str()).collect();
            Error::Config(format!(
                "no unit is named `{name}`; the units are {known:?}"
            ))
        })
    }
}

fn collective_or_config(group: &ProcessGroup, what: &str, cause: String) -> Error {
    if crate::ddp::is_communication(&cause) {
        group.collective(what, &cause)
    } else {
        Error::Config(cause)
    }
}

/// A unit's shard variable: its name with dots as the `VarStore`'s path.
fn shard_var(
    vs: &nn::VarStore,
    unit: &str,
    len: i64,
    kind: tch::Kind,
    device: tch::Device,
) -> Tensor {
    let mut parts: Vec<&str> = unit.split('.').collect();
    let last = parts.pop().unwrap_or(unit);
    let path = parts.iter().fold(vs.root(), |p, part| p / *part);
    path.add(last, Tensor::zeros([len], (kind, device)), true)
}
