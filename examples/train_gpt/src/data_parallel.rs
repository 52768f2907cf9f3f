//! A child's side of a data-parallel run (`--ranks N`, `--rank R
//! --world-size N`): joining the group through remat_distributed, taking
//! this rank's shard of each batch, averaging the logged loss, and under
//! `--check` comparing the parameters with rank 0's after every step.
//!
//! Invariant: every rank draws the same global batch (same seed) and keeps
//! rows `rank, rank + N, ...`; the gradients DDP averages are those of the
//! whole batch, whatever the policy (docs/semantics.md, rules W5, W6).

use crate::options::Options;
use remat_distributed::{DdpOptions, DistributedDataParallel, InitOptions, ProcessGroup, ReduceOp};
use tch::{Kind, Tensor};

/// This process's place in a data-parallel run.
pub struct Rank {
    pub group: ProcessGroup,
    pub ddp: DistributedDataParallel,
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
        Ok(Rank { group, ddp })
    }

    /// The ranks' mean of a shard's loss, for the log.
    pub fn mean_loss(&self, loss: &Tensor) -> Result<f64, String> {
        let mut logged = loss.detach().to_kind(Kind::Double);
        self.group
            .all_reduce(&mut logged, ReduceOp::Average)
            .map_err(|e| e.to_string())?;
        f64::try_from(&logged).map_err(|e| e.to_string())
    }

    /// The last backward's time in c10d communication, ns (the union of
    /// its buckets' launch-to-completion spans, docs/semantics.md, rule W9).
    pub fn comm_ns(&self) -> Result<u64, String> {
        let stats = self.ddp.last_backward().map_err(|e| e.to_string())?;
        Ok(stats.communication().as_nanos() as u64)
    }

    /// `Err` on every rank unless every rank's parameters hash like rank
    /// 0's: each compares rank 0's broadcast hash with its own, then the
    /// mismatches are summed, so all ranks agree on the verdict.
    pub fn check_equal(&self, step: usize) -> Result<(), String> {
        let own = hash(self.ddp.parameters());
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
