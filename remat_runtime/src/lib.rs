//! Runtime of remat: checkpoint regions and the libtorch bridge they stand on.
//!
//! Most users depend on the `remat` crate, which re-exports everything here
//! together with the macros. What this crate offers today:
//!
//! - checkpoints ([`checkpoint`]) with `Save` and `Recompute` regions
//!   ([`region`]), placeholders for skipped outputs, saved-input rebuilding,
//!   state hooks ([`RecomputeStateHook`]) and determinism checks;
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
mod capture;
mod checkpoint;
mod error;
mod frame;
mod function;
mod holder;
mod io;
mod nodes;
mod persist;
mod region;
mod report;
mod save_region;
mod saved_hooks;
mod saved_input;
mod saved_report;
mod state_hooks;
mod trace;

pub use bridge::{
    backward_with, grad_enabled, graph_task_id, graph_task_keeps_graph, is_leaf, is_placeholder,
    placeholder, rng_state, set_grad_enabled, set_rng_state, storage_key, storage_nbytes,
    storage_offset, tensor_version, GradModeGuard, PlaceholderSpec, StorageKey, WeakStorage,
    WeakTensor,
};
pub use capture::Capture;
pub use checkpoint::{checkpoint, live_checkpoints, Checkpoint, Determinism};
pub use error::{Error, Result};
pub use frame::{is_recomputing, Phase};
pub use function::{apply, try_apply, BackwardContext, ForwardContext, Function};
pub use io::{CheckpointInputs, Opaque, OutputItem, RegionInput, RegionInputs, RegionOutput};
pub use region::{recompute_needs_tensor, region, Policy, Region};
pub use report::{memory_report, KeptStorage, MemoryReport, RegionMemory};
pub use saved_hooks::{
    current_saved_tensor_info, saved_tensors_hooks, SavedTensorInfo, SavedTensorKind,
    SavedTensorsHooks, TensorHooks,
};
pub use saved_report::{
    saved_tensors_report, track_saved_tensors, CheckpointMemory, OutsideSaves, SavedTensorsReport,
};
pub use state_hooks::{RecomputeStateHook, RngStateHook};
pub use tch::Tensor;
pub use trace::{collect_trace, enter_scope, trace_scope, ScopeGuard, Trace, TraceEntry};

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
