//! A joined group and the collectives a training loop needs
//! (docs/semantics.md, rules W2, W3, W8).

use crate::bridge;
use crate::error::{Error, Result};
use crate::init::{Backend, InitOptions};
use tch::Tensor;

/// How [`ProcessGroup::all_reduce`] combines the ranks' tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum over the ranks.
    Sum,
    /// The sum divided by the world size (Gloo has no average of its own).
    Average,
}

/// This process's membership of a c10d process group (Gloo on CPU).
///
/// All communication goes through c10d. Every rank must issue the same
/// collectives in the same order (docs/semantics.md, rule W3).
///
/// ```
/// use remat_distributed::{InitOptions, ProcessGroup, ReduceOp};
/// // A world of one: the group forms at once and collectives are identities.
/// let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
/// let group = ProcessGroup::init(&InitOptions::new(0, 1, "127.0.0.1", port)).unwrap();
/// let mut loss = tch::Tensor::from(3.0f32);
/// group.all_reduce(&mut loss, ReduceOp::Average).unwrap();
/// assert_eq!(f32::try_from(&loss).unwrap(), 3.0);
/// group.barrier().unwrap();
/// ```
pub struct ProcessGroup {
    raw: bridge::Group,
    opts: InitOptions,
}

impl ProcessGroup {
    /// Joins the group `opts` describes: rank 0 hosts a TCPStore at
    /// `master_addr:master_port`, every rank connects to it, then Gloo
    /// connects every pair. Returns once all ranks have joined, or with
    /// [`Error::Init`] after `opts.timeout` (docs/semantics.md, rule W2).
    pub fn init(opts: &InitOptions) -> Result<ProcessGroup> {
        let device_host = opts.validate()?;
        let nccl = opts.backend == Backend::Nccl;
        if nccl {
            nccl_usable()?;
        }
        let timeout_ms = i64::try_from(opts.timeout.as_millis()).unwrap_or(i64::MAX);
        let raw = bridge::Group::new(
            &opts.master_addr,
            opts.master_port,
            opts.rank as i32,
            opts.world_size as i32,
            timeout_ms,
            &device_host,
            nccl,
        )
        .map_err(|e| Error::Init(init_message(opts, &e)))?;
        Ok(ProcessGroup {
            raw,
            opts: opts.clone(),
        })
    }

    /// [`ProcessGroup::init`] with [`InitOptions::from_env`].
    pub fn from_env() -> Result<ProcessGroup> {
        ProcessGroup::init(&InitOptions::from_env()?)
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.opts.rank
    }

    /// How many ranks the group has.
    pub fn world_size(&self) -> usize {
        self.opts.world_size
    }

    /// The options the group was joined with.
    pub fn options(&self) -> &InitOptions {
        &self.opts
    }

    /// Combines `t` over the ranks, in place (a loss for logging, say).
    pub fn all_reduce(&self, t: &mut Tensor, op: ReduceOp) -> Result<()> {
        self.raw
            .all_reduce_sum(t)
            .map_err(|e| self.collective("all_reduce", &e))?;
        if op == ReduceOp::Average {
            let _ = tch::no_grad(|| t.f_div_scalar_(self.world_size() as f64))
                .map_err(|e| Error::Collective(e.to_string()))?;
        }
        Ok(())
    }

    /// Overwrites `t` on every rank with its value on `root`.
    pub fn broadcast(&self, t: &mut Tensor, root: usize) -> Result<()> {
        if root >= self.world_size() {
            return Err(Error::Config(format!(
                "broadcast from rank {root} in a world of {} ranks",
                self.world_size()
            )));
        }
        self.raw
            .broadcast(t, root as i32)
            .map_err(|e| self.collective("broadcast", &e))
    }

    /// Returns once every rank has called it.
    pub fn barrier(&self) -> Result<()> {
        self.raw
            .barrier()
            .map_err(|e| self.collective("barrier", &e))
    }

    pub(crate) fn raw(&self) -> &bridge::Group {
        &self.raw
    }

    pub(crate) fn collective(&self, what: &str, cause: &str) -> Error {
        Error::Collective(format!(
            "{what} on rank {} of {} failed: {cause}. A peer has left or stopped answering \
             within the timeout ({:?}): look at the other ranks' output for the first error \
             (docs/semantics.md, rule W8)",
            self.rank(),
            self.world_size(),
            self.opts.timeout
        ))
    }
}

/// Whether `Backend::Nccl` can form a group here: a build with the `cuda`
/// feature and a visible CUDA device (docs/semantics.md, rule W2).
fn nccl_usable() -> Result<()> {
    if !cfg!(feature = "cuda") {
        return Err(Error::NotBuilt(
            "remat_distributed was built without the `cuda` feature, which Backend::Nccl needs: \
             build with `--features cuda` (against a CUDA libtorch), or use Backend::Gloo (CPU \
             tensors)"
                .into(),
        ));
    }
    if !tch::Cuda::is_available() {
        return Err(Error::Config(
            "NCCL needs a CUDA device; none is visible: run on a machine with a GPU (check \
             CUDA_VISIBLE_DEVICES), or use Backend::Gloo (CPU tensors)"
                .into(),
        ));
    }
    if !cfg!(remat_nccl) {
        return Err(Error::NotBuilt(format!(
            "remat_distributed was built with the `cuda` feature but without NCCL: its build \
             found no {}. Install the torch wheel's nvidia-nccl and nvidia-cuda-cccl packages \
             (or set CCCL_INCLUDE or CUDA_HOME) and rebuild",
            option_env!("REMAT_NCCL_MISSING").unwrap_or("headers")
        )));
    }
    Ok(())
}

fn init_message(opts: &InitOptions, cause: &str) -> String {
    let role = if opts.rank == 0 {
        "hosting the store at"
    } else {
        "joining the store at"
    };
    format!(
        "rank {} of {} could not form the group {role} {}:{} within {:?}: {cause}. Start all \
         {} ranks with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, check that rank 0 can \
         listen on the port and the others reach it, or raise the timeout (REMAT_DIST_TIMEOUT \
         or InitOptions::timeout) (docs/semantics.md, rule W2)",
        opts.rank,
        opts.world_size,
        opts.master_addr,
        opts.master_port,
        opts.timeout,
        opts.world_size
    )
}
