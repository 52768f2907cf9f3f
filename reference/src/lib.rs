//! The reference models of remat, used by its tests, examples and
//! benchmarks:
//!
//! - the reference model (docs/reference-model.md): a GPT-style
//!   byte-level language model, written once, op for op as the design
//!   fixes, so that losses, gradients and bytes compare across policies and
//!   against other implementations on the same libtorch. In layers, each
//!   using only those above it in this list: `runtime_api` (parameters,
//!   configurations, the ops, and the block under each policy written with
//!   the runtime API), [`macros`] (the same block written with `remat!` and
//!   `#[checkpoint]`), and [`model`] (re-exports `runtime_api`, the loss
//!   through the macro blocks, and the tests' [`Setup`](model::Setup));
//! - two models in tch's `nn` style with `remat::nn`, each comparable
//!   bitwise against itself without checkpoints: [`resnet`] (batch norm in
//!   train mode) and [`gpt_dropout`] (dropout, recomputed with the forward's
//!   masks by every checkpoint's kept random state).
//!
//! ```
//! use remat_reference::{batch, Model, ModelPolicy, SMALL};
//! let model = Model::new(SMALL, 0);
//! let (tokens, targets) = batch(SMALL, 1);
//! model.loss(&tokens, &targets, ModelPolicy::Full).backward();
//! ```

#![deny(unsafe_code)]

pub mod gpt_dropout;
pub mod macros;
pub mod measure;
pub mod model;
pub mod numbers;
pub mod peak_contract;
pub mod planned;
pub mod resnet;
mod runtime_api;
pub mod testing;

pub use model::{batch, Config, Model, ModelPolicy, DEEP, MEDIUM, POLICIES, SMALL, VOCAB};
