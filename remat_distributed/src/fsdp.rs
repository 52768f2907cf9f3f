//! Fully sharded data parallel over c10d's all-gather and reduce-scatter
//! (docs/semantics.md, section F; docs/distributed.md, "Sharded data
//! parallel").

use crate::bridge;
use crate::error::{Error, Result};
use crate::group::ProcessGroup;
use crate::stats::{FsdpEvent, FsdpEventKind, FsdpStats};
use std::collections::HashMap;
use std::sync::Arc;
use tch::{nn, Tensor};

/// How [`FullyShardedDataParallel`] schedules its gathers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsdpOptions {
    /// Frees a unit's gathered parameters when its forward ends, and
    /// gathers them again for its backward (FSDP's
    /// `reshard_after_forward=True`); `false` keeps them from the forward
    /// to the end of the unit's backward, trading memory for a gather.
    pub reshard_after_forward: bool,
    /// Starts the gather of the unit expected next (the one that followed
    /// in the last step's forward, the one before in backward) while the
    /// current one computes (rule F7).
    pub prefetch: bool,
    /// Sums the ranks' gradients in rank order (c10d's all-to-all, then a
    /// sum on each rank) instead of the backend's reduce-scatter, whose
    /// order is its own (Gloo's is its ring all-reduce's, which differs
    /// chunk by chunk): the bits of one process summing the ranks'
    /// gradients in order, for any world size (rule F5). With two ranks
    /// both give the same bits; the all-to-all moves the same bytes as a
    /// reduce-scatter and holds a gradient-sized buffer until the sum.
    pub rank_ordered_reduce: bool,
    /// The dtype parameters are gathered and computed in (FSDP2's
    /// `MixedPrecisionPolicy.param_dtype`), `None` for their own. Shards,
    /// gradients in shards and the optimizer stay in the parameters' dtype;
    /// gradients arrive in it too (rule F8).
    pub param_dtype: Option<tch::Kind>,
    /// The dtype gradients are summed over the ranks in, `None` for the
    /// parameters' own.
    pub reduce_dtype: Option<tch::Kind>,
    /// Keeps the shards (and so their gradients and the optimizer's state)
    /// on the CPU, copying them to the parameters' device to gather (ZeRO-
    /// Offload; rule F8). On a CPU-only model it changes nothing.
    pub offload_shards: bool,
}

impl Default for FsdpOptions {
    fn default() -> FsdpOptions {
        FsdpOptions {
            reshard_after_forward: true,
            prefetch: true,
            rank_ordered_reduce: false,
            param_dtype: None,
            reduce_dtype: None,
            offload_shards: false,
        }
    }
}

/// A group of parameters gathered and freed together: typically one
/// transformer block, plus one unit for whatever is left (embeddings, head).
///
/// ```
/// use remat_distributed::Unit;
/// let w = tch::Tensor::zeros([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let unit = Unit::new("layers.0", vec![("layers.0.w".to_string(), w)]);
/// assert_eq!(unit.name(), "layers.0");
/// ```
pub struct Unit {
    name: String,
    params: Vec<(String, Tensor)>,
}

impl Unit {
    /// A unit named `name` over `params` (name, tensor), in an order every
    /// rank shares.
    pub fn new(name: impl Into<String>, params: Vec<(String, Tensor)>) -> Unit {
        Unit {
            name: name.into(),
            params,
        }
    }

    /// The unit's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The tensors a unit's forward returns, whose gradients start the unit's
/// backward (rule F3).
pub trait UnitOutput {
    /// The tensors to watch.
    fn tensors(&self) -> Vec<&Tensor>;
}

impl UnitOutput for Tensor {
    fn tensors(&self) -> Vec<&Tensor> {
        vec![self]
    }
}

impl UnitOutput for (Tensor, Tensor) {
    fn tensors(&self) -> Vec<&Tensor> {
        vec![&self.0, &self.1]
    }
}

impl UnitOutput for Vec<Tensor> {
    fn tensors(&self) -> Vec<&Tensor> {
        self.iter().collect()
    }
}

/// What the runtime keeps of a unit.
struct UnitInfo {
    name: String,
    params: Vec<(String, Vec<i64>)>,
    padded: i64,
    kind: tch::Kind,
    device: tch::Device,
}

/// Trains a model whose parameters are split across the ranks: each rank
/// holds `1 / world` of every unit's parameters (its shard), of their
/// gradients and of the optimizer's state; a unit's parameters are
/// all-gathered just before its forward and again before its backward (or
/// before a checkpoint inside it recomputes), and its gradients are
/// reduce-scattered into the shards as its backward ends
/// (docs/semantics.md, rules F1-F8).
///
/// The model keeps its own parameter tensors: between uses they are empty
/// (`size() == [0]`) and hold no bytes. The optimizer steps
/// [`shards`](Self::shards), a `VarStore` of one variable per unit.
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

/// What the model and every [`UnitHandle`] share.
struct Core {
    raw: bridge::Fsdp,
    rank: usize,
    world_size: usize,
    timeout: std::time::Duration,
}

/// One unit of a [`FullyShardedDataParallel`], to run its forward from a
/// checkpoint's closure (which must own what it uses: a handle is `Send`,
/// `'static` and cheap to clone). Built by
/// [`FullyShardedDataParallel::handle`].
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
    core: Arc<Core>,
    index: usize,
    name: Arc<str>,
}

impl UnitHandle {
    /// Runs the unit's forward `f`, as [`FullyShardedDataParallel::unit`].
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
    fn failed(&self, what: &str, cause: String) -> Error {
        if crate::ddp::is_communication(&cause) {
            self.lost_peer(what, &cause)
        } else {
            Error::Config(cause)
        }
    }

    fn lost_peer(&self, what: &str, cause: &str) -> Error {
        Error::Collective(format!(
            "{what} on rank {} of {} failed: {cause}. A peer has left or stopped answering \
             within the timeout ({:?}): stop this rank, and look at the other ranks' output \
             for the first error (docs/semantics.md, rule W8)",
            self.rank, self.world_size, self.timeout
        ))
    }
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
        check_units(&units)?;
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
        let mut named: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
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
        let index = *self.by_name.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.units.iter().map(|u| u.name.as_str()).collect();
            Error::Config(format!(
                "no unit is named `{name}`; the units are {known:?}"
            ))
        })?;
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

    /// Every parameter's full value under its name, gathered unit by unit
    /// (every rank takes part and receives it; save it on rank 0). The
    /// units' own buffers are not touched.
    pub fn full_state_dict(&self) -> Result<Vec<(String, Tensor)>> {
        let mut out = Vec::new();
        for (i, u) in self.units.iter().enumerate() {
            let flat = Tensor::zeros([u.padded], (u.kind, u.device));
            self.core
                .raw
                .gather_into(i, &flat)
                .map_err(|e| self.core.failed(&format!("gathering unit `{}`", u.name), e))?;
            let mut at = 0i64;
            for (name, shape) in &u.params {
                let n: i64 = shape.iter().product();
                out.push((
                    name.clone(),
                    flat.narrow(0, at, n).view(shape.as_slice()).copy(),
                ));
                at += n;
            }
        }
        Ok(out)
    }

    /// Loads full values (as [`full_state_dict`](Self::full_state_dict)
    /// returns them, on every rank) into this rank's shards. Every
    /// parameter must be present with its shape; names no unit has are an
    /// error.
    pub fn load_full_state_dict(&self, named: &[(String, Tensor)]) -> Result<()> {
        let given: HashMap<&str, &Tensor> = named.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let known: usize = self.units.iter().map(|u| u.params.len()).sum();
        if given.len() != known {
            let ours: std::collections::HashSet<&str> = self
                .units
                .iter()
                .flat_map(|u| u.params.iter().map(|(n, _)| n.as_str()))
                .collect();
            if let Some(extra) = given.keys().find(|n| !ours.contains(*n)) {
                return Err(Error::Config(format!(
                    "load_full_state_dict: `{extra}` is no parameter of any unit"
                )));
            }
        }
        let world = self.core.world_size as i64;
        for u in &self.units {
            let mut parts = Vec::new();
            for (name, shape) in &u.params {
                let t = given.get(name.as_str()).ok_or_else(|| {
                    Error::Config(format!(
                        "load_full_state_dict: parameter `{name}` of unit `{}` is missing",
                        u.name
                    ))
                })?;
                if t.size() != *shape {
                    return Err(Error::Config(format!(
                        "load_full_state_dict: `{name}` has shape {:?}, the unit `{}` holds \
                         {shape:?}",
                        t.size(),
                        u.name
                    )));
                }
                parts.push(t.to_kind(u.kind).to_device(u.device).reshape([-1]));
            }
            let total: i64 = parts.iter().map(|p| p.numel() as i64).sum();
            parts.push(Tensor::zeros([u.padded - total], (u.kind, u.device)));
            let flat = Tensor::cat(&parts, 0);
            let len = u.padded / world;
            let shard = self.shard(&u.name);
            tch::no_grad(|| {
                shard
                    .shallow_clone()
                    .copy_(&flat.narrow(0, self.core.rank as i64 * len, len))
            });
        }
        Ok(())
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
    /// (padded with zeros to a multiple of the world size).
    pub fn shard(&self, name: &str) -> Tensor {
        let path = shard_path(name);
        self.shards
            .variables()
            .remove(&path)
            .unwrap_or_else(|| panic!("unit {name} has a shard named {path}"))
    }
}

fn collective_or_config(group: &ProcessGroup, what: &str, cause: String) -> Error {
    if crate::ddp::is_communication(&cause) {
        group.collective(what, &cause)
    } else {
        Error::Config(cause)
    }
}

/// Everything about the units that can be checked before any is sharded,
/// so that a refused list leaves the model as it was.
fn check_units(units: &[Unit]) -> Result<()> {
    let mut names = std::collections::HashSet::new();
    let mut seen: HashMap<usize, &str> = HashMap::new();
    for unit in units {
        let name = unit.name.as_str();
        if !names.insert(name) {
            return Err(Error::Config(format!(
                "two units are named `{name}`: give each unit its own name"
            )));
        }
        let Some((first_name, first)) = unit.params.first() else {
            return Err(Error::Config(format!(
                "unit `{name}` has no parameters: leave it out, or give it some"
            )));
        };
        for (pname, p) in &unit.params {
            if !p.requires_grad() || !p.is_leaf() {
                return Err(Error::Config(format!(
                    "sharded unit `{name}`: parameter `{pname}` is not a trainable leaf: pass \
                     trainable parameters only"
                )));
            }
            if p.numel() == 0 || !p.is_contiguous() {
                return Err(Error::Config(format!(
                    "sharded unit `{name}`: parameter `{pname}` is empty or not contiguous"
                )));
            }
            if p.kind() != first.kind() || p.device() != first.device() {
                return Err(Error::Config(format!(
                    "sharded unit `{name}`: parameter `{pname}` is {:?} on {:?} but \
                     `{first_name}` is {:?} on {:?}: a unit's parameters share one dtype and \
                     device; split it into units that do",
                    p.kind(),
                    p.device(),
                    first.kind(),
                    first.device()
                )));
            }
            if let Some(other) = seen.insert(p.data_ptr() as usize, name) {
                return Err(Error::Config(format!(
                    "parameter `{pname}` of unit `{name}` is also in unit `{other}`: a \
                     parameter belongs to one unit"
                )));
            }
        }
    }
    Ok(())
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

fn shard_path(unit: &str) -> String {
    unit.to_string()
}
