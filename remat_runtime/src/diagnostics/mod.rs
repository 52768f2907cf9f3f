//! What the runtime tells about a model: the trace of regions, the memory
//! report of one checkpoint, the whole-model saved-for-backward report, and
//! the forward timings the planner profiles.

pub(crate) mod cuda;
pub(crate) mod format;
pub(crate) mod memory_report;
pub(crate) mod profiling;
pub(crate) mod saved_report;
pub(crate) mod trace;
