//! Hooks users give the runtime, as values: save names, and state hooks
//! (`state_hooks`, `buffers`). Saved-tensor hook pairs are the mechanism's
//! (`checkpointing/tensor_hooks.rs`, applied by
//! `checkpointing/saved_tensors.rs`): where a pair applies depends on the
//! running checkpoint.

pub(crate) mod buffers;
pub(crate) mod save_names;
pub(crate) mod state_hooks;
