//! The reference model of remat (shared/design/reference-model.md): a
//! GPT-style byte-level language model, written once, op for op as the
//! design fixes, so that losses, gradients and bytes compare across
//! policies and against other implementations on the same libtorch.
//!
//! - [`model`]: parameters, configurations, the ops, and the block under
//!   each policy written with the runtime API;
//! - [`macros`]: the same block written with `remat!` and `#[checkpoint]`;
//! - [`resnet`] and [`gpt_dropout`]: two models in tch's `nn` style with
//!   `remat::nn`, each comparable bitwise against itself without
//!   checkpoints (batch norm in train mode; dropout).
//!
//! Used by the `remat` package's tests, examples and benchmarks.

pub mod gpt_dropout;
pub mod macros;
pub mod resnet;
pub mod runtime_api;

// The path every user names, while `model.rs` is being split off again.
pub use runtime_api as model;

pub use model::{batch, Config, Model, ModelPolicy, DEEP, MEDIUM, POLICIES, SMALL, VOCAB};
