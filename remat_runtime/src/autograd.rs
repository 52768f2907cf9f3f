//! Autograd beyond what tch exposes: custom autograd functions written in
//! Rust ([`Function`], [`apply`]), grad mode and the running backward,
//! a backward that can retain the graph, placeholder tensors, the state of
//! libtorch's random generators and a lock on the process-wide one
//! ([`GeneratorLock`], for tests that compare runs with dropout), and what
//! saved-tensor hooks are told when a checkpoint starts to recompute
//! ([`RecomputeStart`]).

pub use crate::bridge::{
    backward_with, grad_enabled, graph_task_id, graph_task_keeps_graph, is_placeholder,
    placeholder, rng_state, set_grad_enabled, set_rng_state, GradModeGuard, PlaceholderSpec,
};
pub use crate::checkpointing::tensor_hooks::RecomputeStart;
pub use crate::function::{apply, try_apply, BackwardContext, ForwardContext, Function};
pub use crate::generator_lock::GeneratorLock;
