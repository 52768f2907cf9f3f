//! Data-parallel training for remat over torch.distributed's C++ core
//! (c10d): a TCPStore, a Gloo process group, c10d's `Reducer` for
//! gradients. Each rank trains on its own shard of a batch; checkpoints
//! inside the model change nothing the ranks see (docs/semantics.md, W;
//! docs/architecture.md says why this is a crate of its own).
//!
//! ```no_run
//! use remat_distributed::{DdpOptions, DistributedDataParallel, ProcessGroup, ReduceOp};
//! # let vs = tch::nn::VarStore::new(tch::Device::Cpu);
//! # let w = vs.root().randn("w", &[4, 4], 0.0, 1.0);
//! # let model_loss = || (&w * 2.0).sum(tch::Kind::Float);
//! // Under torchrun (or RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by hand):
//! let group = ProcessGroup::from_env()?;
//! let ddp = DistributedDataParallel::from_var_store(&group, &vs, DdpOptions::default())?;
//! let loss = ddp.forward(model_loss)?;
//! ddp.backward(&loss)?; // every parameter's grad is now the ranks' mean; a lost peer is an Err
//! let mut logged = loss.detach();
//! group.all_reduce(&mut logged, ReduceOp::Average)?;
//! # Ok::<(), remat_distributed::Error>(())
//! ```

#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod bridge;
mod ddp;
mod error;
mod fsdp;
mod group;
mod init;
mod stats;
mod var_store;

pub use ddp::{DdpOptions, DistributedDataParallel};
pub use error::{Error, Result};
pub use fsdp::{
    FsdpEvent, FsdpEventKind, FsdpOptions, FsdpStats, FullyShardedDataParallel, Unit, UnitHandle,
    UnitOutput,
};
pub use group::{ProcessGroup, ReduceOp};
pub use init::{Backend, InitOptions, DEFAULT_TIMEOUT};
pub use stats::{BackwardStats, BucketLaunch};
