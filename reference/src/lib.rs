//! The reference model of remat (shared/design/reference-model.md): a
//! GPT-style byte-level language model, written once, op for op as the
//! design fixes, so that losses, gradients and bytes compare across
//! policies and against other implementations on the same libtorch.
//!
//! - [`model`]: parameters, configurations, the ops, and the block under
//!   each policy written with the runtime API;
//! - [`macros`]: the same block written with `remat!` and `#[checkpoint]`.
//!
//! Used by the `remat` package's tests, examples and benchmarks.

pub mod macros;
pub mod model;

pub use model::{batch, Config, Model, ModelPolicy, DEEP, MEDIUM, POLICIES, SMALL, VOCAB};
