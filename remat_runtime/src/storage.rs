//! Storage identity and version counters: what the runtime keys kept
//! tensors by, for tests and tools that check what a forward keeps alive
//! (a dead [`WeakStorage`] proves a storage was freed).

pub use crate::bridge::{
    storage_key, storage_nbytes, tensor_version, StorageKey, WeakStorage, WeakTensor,
};
