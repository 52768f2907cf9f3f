//! What the runtime tells about a model: the trace of regions, the memory
//! report of one checkpoint, and the whole-model saved-for-backward report.

pub(crate) mod cuda;
pub(crate) mod format;
pub(crate) mod memory_report;
pub(crate) mod saved_report;
pub(crate) mod trace;
