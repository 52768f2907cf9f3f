//! Hooks users give the runtime, as values: saved-tensor hook pairs
//! (`tensor_hooks`), save names, and state hooks (`state_hooks`,
//! `buffers`). Where a pair applies is the mechanism's job
//! (`checkpointing/saved_tensors.rs`).

pub(crate) mod buffers;
pub(crate) mod save_names;
pub(crate) mod state_hooks;
pub(crate) mod tensor_hooks;
