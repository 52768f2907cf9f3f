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
//! - a memory-budget planner ([`planner`]): profile a model, choose saves
//!   and checkpoints for a byte budget, apply them through `Policy::Auto`
//!   and [`Checkpoint::auto`];
//! - placeholder tensors that have metadata but no data ([`placeholder`]);
//! - storage identity and version counters ([`storage_key`], [`WeakStorage`],
//!   [`tensor_version`]).
//!
//! `docs/architecture.md` in the repository explains how these map onto
//! libtorch.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

// The folders read as the architecture (docs/architecture.md): `bridge`
// (all unsafe code) at the bottom, `checkpointing` (the mechanism), `hooks`
// (what users plug in), `diagnostics` (what the runtime reports).
mod bridge;
mod capture;
mod checkpointing;
mod diagnostics;
mod error;
mod fast_hash;
mod function;
mod hooks;
mod io;
pub mod nn;
mod parts;
pub mod planner;
mod shared;
mod sync;

pub use bridge::{
    backward_with, grad_enabled, graph_task_id, graph_task_keeps_graph, heap_bytes_in_use, is_leaf,
    is_placeholder, placeholder, rng_state, set_grad_enabled, set_rng_state, storage_key,
    storage_nbytes, storage_offset, tensor_version, GradModeGuard, PlaceholderSpec, StorageKey,
    WeakStorage, WeakTensor,
};
pub use capture::Capture;
pub use checkpointing::checkpoint::{checkpoint, Checkpoint};
pub use checkpointing::closure::ReplayableClosure;
pub use checkpointing::determinism::Determinism;
pub use checkpointing::frame::{is_recomputing, Phase};
pub use checkpointing::policy::Policy;
pub use checkpointing::region::{recompute_needs_tensor, region, Region};
pub use checkpointing::state::live_checkpoints;
pub use diagnostics::cuda::{attach_oom_observer, record_allocation_sites};
pub use diagnostics::memory_report::{
    memory_report, InputMemory, KeptStorage, MemoryReport, RegionMemory, StorageView,
};
pub use diagnostics::saved_report::{
    saved_tensors_report, saved_tensors_report_from, track_saved_tensors, CheckpointMemory,
    OutsideSaves, SavedTensorsReport,
};
pub use diagnostics::trace::{
    collect_trace, enter_scope, enter_scope_with, trace_scope, trace_scope_with, ScopeGuard, Trace,
    TraceEntry,
};
pub use error::{Error, Result};
pub use function::{apply, try_apply, BackwardContext, ForwardContext, Function};
pub use hooks::buffers::BufferStateHook;
pub use hooks::saved_tensors::{saved_tensors_hooks, SavedTensorsHooks};
pub use hooks::state::{RecomputeStateHook, RngStateHook};
pub use hooks::tensor_hooks::{
    current_saved_tensor_info, SavedTensorInfo, SavedTensorKind, TensorHooks,
};
pub use io::{CheckpointInputs, Opaque, OutputItem, RegionInput, RegionInputs, RegionOutput};
pub use planner::{Plan, PlanGuard, Profile};
pub use shared::Shared;
pub use tch::Tensor;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
