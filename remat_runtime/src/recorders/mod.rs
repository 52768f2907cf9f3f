//! What the mechanism records as it runs, for the reports above it to read:
//! the trace of regions and scopes a forward went through (`trace`) and the
//! forward and replay timings the planner profiles (`timing`). Below the
//! mechanism: it writes them, nothing here reads it.

pub(crate) mod timing;
pub(crate) mod trace;
