//! How a sharded model schedules its gathers and in which dtypes it
//! computes and reduces (docs/semantics.md, rules F5, F7, F8).

/// How [`FullyShardedDataParallel`](super::FullyShardedDataParallel) schedules its gathers.
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
