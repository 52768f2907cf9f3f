//! Data-parallel gradients through c10d's `Reducer` (docs/semantics.md,
//! W4-W7, W9).

use crate::bridge;
use crate::error::{Error, Result};
use crate::group::ProcessGroup;
use crate::stats::BackwardStats;
use tch::Tensor;

/// How [`DistributedDataParallel`] buckets and reduces gradients; the
/// defaults are PyTorch's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DdpOptions {
    /// The cap of the first bucket reduced (the last parameters), small so
    /// that communication starts early in backward.
    pub first_bucket_bytes: usize,
    /// The cap of every other bucket.
    pub bucket_bytes: usize,
    /// The buffer size of the parameters' broadcast from rank 0.
    pub broadcast_bytes: usize,
    /// Marks parameters the outputs do not reach as ready each step, so
    /// that a step that leaves some unused still finishes (W6).
    pub find_unused_parameters: bool,
    /// The set of used parameters and their order never change, as
    /// PyTorch's `static_graph=True`: the first backward finds the unused
    /// parameters and reduces every bucket when it ends; later ones mark
    /// those parameters ready at once, without a search (rule W7).
    pub static_graph: bool,
}

impl Default for DdpOptions {
    fn default() -> DdpOptions {
        DdpOptions {
            first_bucket_bytes: 1 << 20,
            bucket_bytes: 25 << 20,
            broadcast_bytes: 250 << 20,
            find_unused_parameters: false,
            static_graph: false,
        }
    }
}

/// Averages every parameter's gradient over the ranks during backward,
/// bucket by bucket as their gradients become ready, through c10d's
/// `Reducer`: after `backward`, each parameter's `grad()` is the mean of
/// the ranks' gradients (docs/semantics.md, rule W5), checkpoints and replays
/// included (W6).
///
/// ```
/// use remat_distributed::{DdpOptions, DistributedDataParallel, InitOptions, ProcessGroup};
/// use tch::{nn, nn::Module, Device};
/// let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
/// let group = ProcessGroup::init(&InitOptions::new(0, 1, "127.0.0.1", port)).unwrap();
/// let vs = nn::VarStore::new(Device::Cpu);
/// let layer = nn::linear(vs.root() / "fc", 4, 2, Default::default());
/// let ddp = DistributedDataParallel::from_var_store(&group, &vs, DdpOptions::default()).unwrap();
/// let x = tch::Tensor::ones([3, 4], (tch::Kind::Float, Device::Cpu));
/// let loss = ddp.forward(|| layer.forward(&x).sum(tch::Kind::Float)).unwrap();
/// loss.backward();
/// assert!(layer.ws.grad().defined());
/// ```
pub struct DistributedDataParallel {
    reducer: bridge::Reducer,
    params: Vec<Tensor>,
    options: DdpOptions,
    /// This rank, the world's size and the group's timeout, for messages.
    rank: usize,
    world_size: usize,
    timeout: std::time::Duration,
}

impl DistributedDataParallel {
    /// Over `params` (the same list, in the same order, on every rank):
    /// broadcasts their values from rank 0 and builds c10d's Reducer with
    /// buckets from `compute_bucket_assignment_by_size` (W4).
    pub fn new(
        group: &ProcessGroup,
        params: &[Tensor],
        options: DdpOptions,
    ) -> Result<DistributedDataParallel> {
        if params.is_empty() {
            return Err(Error::Config(
                "DistributedDataParallel over no parameters: pass the trainable ones".into(),
            ));
        }
        if let Some(i) = params.iter().position(|p| !p.requires_grad()) {
            return Err(Error::Config(format!(
                "parameter {i} does not require grad: pass only trainable parameters"
            )));
        }
        let refs: Vec<&Tensor> = params.iter().collect();
        let bytes = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        group
            .raw()
            .broadcast_coalesced(&refs, bytes(options.broadcast_bytes))
            .map_err(|e| group.collective("the parameters' broadcast from rank 0", &e))?;
        let reducer = bridge::Reducer::new(
            group.raw(),
            &refs,
            bytes(options.first_bucket_bytes),
            bytes(options.bucket_bytes),
            options.find_unused_parameters,
            options.static_graph,
        )
        .map_err(Error::Collective)?;
        Ok(DistributedDataParallel {
            reducer,
            params: params.iter().map(Tensor::shallow_clone).collect(),
            options,
            rank: group.rank(),
            world_size: group.world_size(),
            timeout: group.options().timeout,
        })
    }

    /// Over a `VarStore`'s trainable variables, ordered by name so that
    /// every rank lists them alike (a `VarStore` keeps no order).
    pub fn from_var_store(
        group: &ProcessGroup,
        vs: &tch::nn::VarStore,
        options: DdpOptions,
    ) -> Result<DistributedDataParallel> {
        let params: Vec<Tensor> = crate::var_store::trainable_by_name(vs)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        DistributedDataParallel::new(group, &params, options)
    }

    /// Runs one step's forward: what PyTorch's DDP does around a module's
    /// forward (rebuild the buckets after the first step, then
    /// [`prepare_for_backward`](Self::prepare_for_backward) with the
    /// output). Call `backward` on the result, or on a value computed from
    /// it, once.
    pub fn forward(&self, f: impl FnOnce() -> Tensor) -> Result<Tensor> {
        if remat_runtime::autograd::grad_enabled() {
            self.reducer
                .rebuild_buckets()
                .map_err(|e| self.lost_peer("the buckets' rebuild", &e))?;
        }
        let out = f();
        if remat_runtime::autograd::grad_enabled() {
            self.prepare_for_backward(&[&out])?;
        }
        Ok(out)
    }

    /// Runs backward from `loss` (what [`forward`](Self::forward) returned,
    /// or a value computed from it), during which the Reducer averages the
    /// gradients over the ranks: the fallible `loss.backward()` of a
    /// training loop. A reduction that fails, because a peer has left or
    /// has not answered within the group's timeout, is
    /// [`Error::Collective`], naming this rank, the world and the timeout
    /// (rule W8), instead of a panic out of tch's `backward`; any other
    /// failure (a checkpoint's recomputation, say) is [`Error::Backward`].
    /// Either way this rank cannot go on with the step: stop it.
    ///
    /// ```
    /// use remat_distributed::{DdpOptions, DistributedDataParallel, InitOptions, ProcessGroup};
    /// use tch::{nn, nn::Module, Device};
    /// let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    /// let group = ProcessGroup::init(&InitOptions::new(0, 1, "127.0.0.1", port)).unwrap();
    /// let vs = nn::VarStore::new(Device::Cpu);
    /// let layer = nn::linear(vs.root() / "fc", 4, 2, Default::default());
    /// let ddp = DistributedDataParallel::from_var_store(&group, &vs, DdpOptions::default()).unwrap();
    /// let x = tch::Tensor::ones([3, 4], (tch::Kind::Float, Device::Cpu));
    /// let loss = ddp.forward(|| layer.forward(&x).sum(tch::Kind::Float)).unwrap();
    /// ddp.backward(&loss).unwrap();
    /// assert!(layer.ws.grad().defined());
    /// ```
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        remat_runtime::autograd::backward_with(loss, false).map_err(|e| {
            let message = e.to_string();
            if is_communication(&message) {
                self.lost_peer("the gradients' all-reduce in backward", &message)
            } else {
                Error::Backward(message)
            }
        })
    }

    /// W8's error for a step's communication that failed.
    fn lost_peer(&self, what: &str, cause: &str) -> Error {
        Error::Collective(format!(
            "{what} on rank {} of {} failed: {cause}. A peer has left or stopped answering \
             within the timeout ({:?}): stop this rank, and look at the other ranks' output \
             for the first error (docs/semantics.md, rule W8)",
            self.rank, self.world_size, self.timeout
        ))
    }

    /// Tells the Reducer a backward from `outputs` follows; with
    /// `find_unused_parameters` (and no static graph) it searches their
    /// graph for parameters no output reaches (W6, W7).
    /// [`forward`](Self::forward) calls it.
    pub fn prepare_for_backward(&self, outputs: &[&Tensor]) -> Result<()> {
        self.reducer
            .prepare_for_backward(outputs)
            .map_err(Error::Collective)
    }

    /// Notes, when autograd next computes `t`'s gradient, how many buckets
    /// had been launched ([`BackwardStats::watched`]): watching a value
    /// whose gradient comes late in backward, such as the model's input,
    /// shows whether communication overlaps backward (rule W9). `t` must
    /// require grad.
    pub fn watch(&self, t: &Tensor) -> Result<()> {
        self.reducer.watch(t).map_err(Error::Config)
    }

    /// What the backward after the last [`forward`](Self::forward) has done
    /// so far: reports per parameter, buckets launched and completed,
    /// watched tensors (rule W9).
    pub fn last_backward(&self) -> Result<BackwardStats> {
        let (reports, launches, watched) = self
            .reducer
            .stats(self.params.len())
            .map_err(Error::Collective)?;
        Ok(BackwardStats::from_raw(reports, launches, watched))
    }

    /// The parameters, in the order given.
    pub fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    /// The buckets as indices into [`parameters`](Self::parameters), in
    /// the order the Reducer was built with (the first reduced first).
    pub fn buckets(&self) -> Result<Vec<Vec<usize>>> {
        self.reducer
            .buckets(self.params.len())
            .map_err(Error::Collective)
    }

    /// The options.
    pub fn options(&self) -> DdpOptions {
        self.options
    }
}

/// Whether a failed backward's message comes from communication (Gloo's or
/// NCCL's transport, c10d's process group or store) rather than from the
/// model.
pub(crate) fn is_communication(message: &str) -> bool {
    const MARKS: [&str; 10] = [
        "gloo",
        "Gloo",
        "NCCL",
        "c10d",
        "ProcessGroup",
        "Connection",
        "Timed out",
        "timed out",
        // Gloo's transport, when a peer does not answer within the timeout.
        "Application timeout",
        "pair closure",
    ];
    MARKS.iter().any(|m| message.contains(m))
}

#[cfg(test)]
mod tests {
    use super::is_communication;

    /// What NCCL and Gloo say when a peer is gone or late counts as
    /// communication (rule W8), so that both backends' failures in a
    /// backward are `Error::Collective`; a model's own error is not.
    #[test]
    fn nccl_and_gloo_failures_are_communication_and_model_errors_are_not() {
        for message in [
            "NCCL error in: ProcessGroupNCCL.cpp:1935, unhandled system error",
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3)",
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer",
            "Application timeout caused pair closure",
            "c10d::TCPStore: Timed out after 5000ms",
        ] {
            assert!(is_communication(message), "{message}");
        }
        assert!(!is_communication(
            "mat1 and mat2 shapes cannot be multiplied (4x8 and 3x8)"
        ));
    }
}
