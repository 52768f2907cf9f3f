//! A child's side of a data-parallel run (`--ranks N`, `--rank R
//! --world-size N`): joining the group through remat_distributed (DDP, or
//! with `--fsdp` sharded units), taking this rank's shard of each batch,
//! averaging the logged loss, and under `--check` comparing the parameters
//! (the full ones, gathered, under `--fsdp`) with rank 0's after every step.
//!
//! Invariant: every rank draws the same global batch (same seed) and keeps
//! rows `rank, rank + N, ...`; the gradients DDP or the units average are
//! those of the whole batch, whatever the policy (docs/semantics.md, rules
//! W5, W6, F5).

use crate::options::Options;
use remat_distributed::{
    DdpOptions, DistributedDataParallel, FsdpEventKind, FsdpOptions, FullyShardedDataParallel,
    InitOptions, ProcessGroup, ReduceOp,
};
use remat_reference::model::{block_forward, Model, ModelPolicy};
use tch::{Kind, Tensor};

/// How the ranks share the work.
pub enum Parallel {
    /// Every rank holds the whole model; gradients are all-reduced.
    Ddp(DistributedDataParallel),
    /// Each block a unit, the rest a `root` unit.
    Fsdp(FullyShardedDataParallel),
}

/// This process's place in a data-parallel run.
pub struct Rank {
    pub group: ProcessGroup,
    pub parallel: Parallel,
}

/// What a sharded rank holds and moved over one step (`--fsdp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sharded {
    /// This rank's shards of the parameters, bytes.
    pub params: i64,
    /// Their gradients (the same size).
    pub grads: i64,
    /// AdamW's two moments on the shards.
    pub optimizer: i64,
    /// The most gathered parameters at once during the last backward.
    pub gathered: i64,
    /// Gathers issued ahead of their unit (prefetched) and in all, last step.
    pub prefetched: usize,
    pub gathers: usize,
}

/// The group's options from the command line a child was given; the
/// timeout from `REMAT_DIST_TIMEOUT` when set.
pub fn init_options(opts: &Options) -> Result<Option<InitOptions>, String> {
    let (Some(rank), Some(world)) = (opts.rank, opts.world_size) else {
        return Ok(None);
    };
    let port = opts
        .master_port
        .ok_or("a data-parallel run needs --master-port (or MASTER_PORT)")?;
    let from_env = |name: &str| std::env::var(name).ok();
    let mut init = InitOptions::from_vars(|name| match name {
        "RANK" => Some(rank.to_string()),
        "WORLD_SIZE" => Some(world.to_string()),
        "LOCAL_RANK" => from_env("LOCAL_RANK").or(Some(rank.to_string())),
        "MASTER_ADDR" => opts.master_addr.clone(),
        "MASTER_PORT" => Some(port.to_string()),
        other => from_env(other),
    })
    .map_err(|e| e.to_string())?;
    if opts.device.is_cuda() {
        init = init.backend(remat_distributed::Backend::Nccl);
    }
    Ok(Some(init))
}

impl Rank {
    /// Joins the group and wraps the model's trainable variables; rank 0's
    /// values are broadcast to every rank here.
    pub fn join(init: &InitOptions, vs: &tch::nn::VarStore) -> Result<Rank, String> {
        let group = ProcessGroup::init(init).map_err(|e| e.to_string())?;
        let ddp = DistributedDataParallel::from_var_store(&group, vs, DdpOptions::default())
            .map_err(|e| e.to_string())?;
        Ok(Rank {
            group,
            parallel: Parallel::Ddp(ddp),
        })
    }

    /// Joins the group and shards `model`: one unit per block, the rest a
    /// `root` unit. From here on the model's parameters hold no bytes
    /// between uses; every forward goes through [`Rank::sharded_loss`].
    pub fn join_sharded(init: &InitOptions, model: &Model) -> Result<Rank, String> {
        let group = ProcessGroup::init(init).map_err(|e| e.to_string())?;
        let names = unit_names(model);
        let units: Vec<&str> = names.iter().map(String::as_str).collect();
        let fsdp = FullyShardedDataParallel::from_var_store(
            &group,
            &model.vs,
            &units,
            FsdpOptions::default(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Rank {
            group,
            parallel: Parallel::Fsdp(fsdp),
        })
    }

    /// The sharded model's loss under `policy`: the root unit around the
    /// model, each block a unit around its checkpoint (rule F3).
    pub fn sharded_loss(
        fsdp: &FullyShardedDataParallel,
        model: &Model,
        x: &Tensor,
        y: &Tensor,
        policy: ModelPolicy,
    ) -> Tensor {
        let names = unit_names(model);
        fsdp.unit("root", || {
            model.loss_through(x, y, |mut h| {
                for (block, name) in model.blocks.iter().zip(&names) {
                    h = fsdp
                        .unit(name, || block_forward(block, &h, policy))
                        .unwrap_or_else(|e| panic!("{e}"));
                }
                h
            })
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs the step's forward (DDP's, which readies its Reducer).
    pub fn forward(&self, f: impl FnOnce() -> Tensor) -> Result<Tensor, String> {
        match &self.parallel {
            Parallel::Ddp(ddp) => ddp.forward(f).map_err(|e| e.to_string()),
            Parallel::Fsdp(_) => Ok(f()),
        }
    }

    /// The step's backward; a lost or late peer is an error naming it
    /// (rules W8), not a panic out of tch's backward.
    pub fn backward(&self, loss: &Tensor) -> Result<(), String> {
        match &self.parallel {
            Parallel::Ddp(ddp) => ddp.backward(loss).map_err(|e| e.to_string()),
            Parallel::Fsdp(fsdp) => fsdp.backward(loss).map_err(|e| e.to_string()),
        }
    }

    /// What a sharded rank holds and moved; `None` under DDP.
    pub fn sharded(&self) -> Result<Option<Sharded>, String> {
        let Parallel::Fsdp(fsdp) = &self.parallel else {
            return Ok(None);
        };
        let mut params = 0i64;
        for u in fsdp.units() {
            let s = fsdp.shard(u).map_err(|e| e.to_string())?;
            params += s.numel() as i64 * s.kind().elt_size_in_bytes() as i64;
        }
        let stats = fsdp.last_step().map_err(|e| e.to_string())?;
        let count = |k| stats.events.iter().filter(|e| e.kind == k).count();
        let prefetched = count(FsdpEventKind::Prefetch);
        Ok(Some(Sharded {
            params,
            grads: params,
            optimizer: 2 * params,
            gathered: fsdp.backward_gathered_peak().map_err(|e| e.to_string())? as i64,
            prefetched,
            gathers: prefetched + count(FsdpEventKind::GatherLaunch),
        }))
    }

    /// The ranks' mean of a shard's loss, for the log.
    pub fn mean_loss(&self, loss: &Tensor) -> Result<f64, String> {
        let mut logged = loss.detach().to_kind(Kind::Double);
        self.group
            .all_reduce(&mut logged, ReduceOp::Average)
            .map_err(|e| e.to_string())?;
        f64::try_from(&logged).map_err(|e| e.to_string())
    }

    /// The last step's time in c10d communication, ns: under DDP the union
    /// of its buckets' launch-to-completion spans (rule W9); sharded, the
    /// union of its gathers' and reduce-scatters' spans (rule F7).
    pub fn comm_ns(&self) -> Result<u64, String> {
        match &self.parallel {
            Parallel::Ddp(ddp) => {
                let stats = ddp.last_backward().map_err(|e| e.to_string())?;
                Ok(stats.communication().as_nanos() as u64)
            }
            Parallel::Fsdp(fsdp) => {
                let stats = fsdp.last_step().map_err(|e| e.to_string())?;
                Ok(stats.communication().as_nanos() as u64)
            }
        }
    }

    /// The parameters every rank must agree on: DDP's own, or the sharded
    /// model's full state dict (gathered: a collective), in name order.
    fn compared(&self) -> Result<Vec<Tensor>, String> {
        match &self.parallel {
            Parallel::Ddp(ddp) => Ok(ddp.parameters().iter().map(Tensor::shallow_clone).collect()),
            Parallel::Fsdp(fsdp) => {
                let mut full = fsdp.full_state_dict().map_err(|e| e.to_string())?;
                full.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(full.into_iter().map(|(_, t)| t).collect())
            }
        }
    }

    /// `Err` on every rank unless every rank's parameters hash like rank
    /// 0's: each compares rank 0's broadcast hash with its own, then the
    /// mismatches are summed, so all ranks agree on the verdict.
    pub fn check_equal(&self, step: usize) -> Result<(), String> {
        let own = hash(&self.compared()?);
        let mut zero = Tensor::from_slice(&[own as i64]);
        self.group
            .broadcast(&mut zero, 0)
            .map_err(|e| e.to_string())?;
        let differs = i64::from(i64::try_from(&zero).map_err(|e| e.to_string())? != own as i64);
        let mut count = Tensor::from_slice(&[differs]);
        self.group
            .all_reduce(&mut count, ReduceOp::Sum)
            .map_err(|e| e.to_string())?;
        match i64::try_from(&count).map_err(|e| e.to_string())? {
            0 => Ok(()),
            n => Err(format!(
                "--check: after step {step}, {n} rank(s) hold parameters that differ from rank \
                 0's (this is rank {}{})",
                self.group.rank(),
                if differs == 1 { ", one of them" } else { "" }
            )),
        }
    }
}

/// The units of a sharded model: its blocks by checkpoint name.
fn unit_names(model: &Model) -> Vec<String> {
    model
        .blocks
        .iter()
        .map(|b| format!("layers.{}", b.index))
        .collect()
}

/// Rank `rank`'s rows of a global batch: `rank, rank + world, ...`.
pub fn shard(t: &Tensor, rank: usize, world: usize) -> Tensor {
    let rows = t.size()[0];
    t.slice(0, rank as i64, rows, world as i64).contiguous()
}

/// FNV-1a over the parameters' bits, in order.
fn hash(params: &[Tensor]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in params {
        let cpu = p.detach().to_device(tch::Device::Cpu).to_kind(Kind::Float);
        let values = Vec::<f32>::try_from(cpu.flatten(0, -1)).expect("float parameters");
        for v in values {
            for b in v.to_bits().to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_sees_one_flipped_bit_and_the_shard_takes_every_nth_row() {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        let b = Tensor::from_slice(&[1.0f32, 2.0, f32::from_bits(3.0f32.to_bits() ^ 1)]);
        assert_eq!(hash(&[a.shallow_clone()]), hash(&[a.copy()]));
        assert_ne!(hash(&[a]), hash(&[b]));
        let rows = Tensor::arange(6, (Kind::Int64, tch::Device::Cpu)).view([6, 1]);
        let one = Vec::<i64>::try_from(shard(&rows, 1, 3).flatten(0, -1)).unwrap();
        assert_eq!(one, [1, 4]);
    }
}
