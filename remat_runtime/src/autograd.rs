//! Autograd beyond what tch exposes: custom autograd functions written in
//! Rust ([`Function`], [`apply`]), grad mode and the running backward,
//! a backward that can retain the graph, placeholder tensors, the
//! state of libtorch's random generators, and whether checkpoints'
//! recomputation stops early (docs/semantics.md, rules C17-C19).

pub use crate::bridge::{
    backward_with, grad_enabled, graph_task_id, graph_task_keeps_graph, placeholder, rng_state,
    set_grad_enabled, set_rng_state, GradModeGuard, PlaceholderSpec,
};
pub use crate::checkpointing::early_stop::{checkpoint_early_stop, set_checkpoint_early_stop};
pub use crate::function::{apply, try_apply, BackwardContext, ForwardContext, Function};
