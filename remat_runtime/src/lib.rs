//! Runtime of remat: checkpoint regions and the libtorch bridge they stand on.
//!
//! Most users depend on the `remat` crate, which re-exports everything here
//! together with the macros. What this crate offers today:
//!
//! - user-defined autograd functions written in Rust ([`Function`], [`apply`]);
//! - saved-tensor hooks without Python ([`saved_tensors_hooks`]);
//! - placeholder tensors that have metadata but no data ([`placeholder`]);
//! - storage identity and version counters ([`storage_key`], [`WeakStorage`],
//!   [`tensor_version`]).
//!
//! `docs/architecture.md` in the repository explains how these map onto
//! libtorch.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod bridge;
mod error;
mod function;
mod saved_hooks;

pub use bridge::{
    backward_with, grad_enabled, graph_task_id, graph_task_keeps_graph, is_leaf, is_placeholder,
    placeholder, set_grad_enabled, storage_key, storage_nbytes, storage_offset, tensor_version,
    GradModeGuard, PlaceholderSpec, SavedAccess, StorageKey, WeakStorage,
};
pub use error::{Error, Result};
pub use function::{apply, try_apply, BackwardContext, ForwardContext, Function};
pub use saved_hooks::{saved_tensors_hooks, SavedTensorsHooks};
pub use tch::Tensor;
