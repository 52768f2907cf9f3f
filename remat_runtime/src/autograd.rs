//! Autograd beyond what tch exposes: custom autograd functions written in
//! Rust ([`Function`], [`apply`]), grad mode and the running backward,
//! a backward that can retain the graph, placeholder tensors, and the
//! state of libtorch's random generators.

pub use crate::bridge::{
    backward_with, grad_enabled, graph_task_id, graph_task_keeps_graph, placeholder, rng_state,
    set_grad_enabled, set_rng_state, GradModeGuard, PlaceholderSpec,
};
pub use crate::function::{apply, try_apply, BackwardContext, ForwardContext, Function};
