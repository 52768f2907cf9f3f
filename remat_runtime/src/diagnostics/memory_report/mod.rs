//! The memory report of the running checkpoint: what its `Save` regions
//! keep for backward. `model` is what a report holds, `collect` builds one
//! from the runtime's records, `render` prints it.

mod collect;
mod model;
mod render;

pub use collect::memory_report;
pub(crate) use collect::{input_memory, region_memory};
pub use model::{
    InputMemory, KeptStorage, MemoryReport, OffloadedStorage, RegionMemory, StorageView,
};
