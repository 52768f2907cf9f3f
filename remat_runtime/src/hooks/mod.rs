//! Hooks users give the runtime: saved-tensor hooks (`tensor_hooks`, and
//! where they apply: `saved_tensors`) and state hooks (`state_hooks`).

pub(crate) mod buffers;
pub(crate) mod save_names;
pub(crate) mod saved_tensors;
pub(crate) mod state_hooks;
pub(crate) mod tensor_hooks;
