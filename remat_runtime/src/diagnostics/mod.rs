//! What the runtime tells about a model: the trace of regions, the memory
//! report of one checkpoint, the whole-model saved-for-backward report, and
//! the forward timings the planner profiles; how those reports print bytes
//! (`human_bytes`, for a report of the user's to print alike); the C heap's
//! bytes in use and the CUDA allocator's counters (`device`), measures of
//! memory independent of remat's own records; the ops a stopped
//! recomputation ran dry (`dry_ops`).

pub(crate) mod cuda;
pub mod device;
pub(crate) mod format;
pub(crate) mod memory_report;
pub(crate) mod saved_report;

pub use crate::bridge::{backward_heap_peak, dry_ops, heap_bytes_in_use};
pub use crate::checkpointing::checkpoint_state::live_checkpoints;
pub use crate::recorders::trace::{
    collect_trace, enter_scope, enter_scope_with, trace_scope, trace_scope_with, ScopeGuard, Trace,
    TraceEntry,
};
pub use cuda::{attach_oom_observer, record_allocation_sites};
pub use format::human_bytes;
pub use memory_report::{
    memory_report, InputMemory, KeptStorage, MemoryReport, OffloadedStorage, RegionMemory,
    StorageView,
};
pub use saved_report::{
    saved_tensors_report, saved_tensors_report_from, track_saved_tensors, CheckpointMemory,
    OutsideSaves, SavedTensorsReport,
};
