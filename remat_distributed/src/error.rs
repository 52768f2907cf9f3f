//! What can go wrong in data-parallel training (docs/semantics.md, W).

/// An error of `remat_distributed`. Each message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A variable or argument that cannot describe a rank of a group: a
    /// missing or malformed `RANK`, `WORLD_SIZE`, `MASTER_ADDR` or
    /// `MASTER_PORT`, a rank outside the world, an address that does not
    /// resolve (docs/semantics.md, rule W1).
    #[error("{0}")]
    Config(String),
    /// The group did not form: rank 0 could not host the store, or the
    /// ranks did not all arrive within the timeout (docs/semantics.md, rule W2).
    #[error("{0}")]
    Init(String),
    /// A collective or a gradient reduction failed, for example because a
    /// peer left (docs/semantics.md, rule W8).
    #[error("{0}")]
    Collective(String),
    /// A backward through [`DistributedDataParallel::backward`] failed for
    /// a reason of the model's, not of communication (a checkpoint's
    /// recomputation, say): libtorch's or remat's message, as is.
    ///
    /// [`DistributedDataParallel::backward`]: crate::DistributedDataParallel::backward
    #[error("backward failed: {0}")]
    Backward(String),
    /// What this build does not include (NCCL).
    #[error("{0}")]
    NotBuilt(String),
}

/// `std::result::Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
