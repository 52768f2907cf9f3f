//! remat: explicit, source-level activation rematerialization for libtorch.
//!
//! This crate re-exports the runtime ([`remat_runtime`]) and the macros
//! ([`remat_derive`]). Most code needs only the prelude:
//!
//! ```
//! use remat::prelude::*;
//!
//! let x = Tensor::ones([2, 2], tch::kind::FLOAT_CPU).set_requires_grad(true);
//! let y = checkpoint("block").call(&x, |x| {
//!     let h = region("double", Policy::Save).call(&x, |x| x * 2);
//!     recompute_needs_tensor(&h);
//!     h.sin()
//! });
//! y.sum(tch::Kind::Float).backward();
//! ```
//!
//! The root holds what model code uses: checkpoints and regions, their
//! policies, state and saved-tensor hooks, the macros, the traits of what
//! regions and checkpoints take and return, and errors. The rest is in
//! named modules: [`diagnostics`], [`planner`], [`autograd`], [`storage`]
//! and [`nn`]. `docs/api.md` lists every public name.
//!
//! `docs/mental-model.md` explains the runtime, `docs/semantics.md` states
//! its rules, `docs/dsl.md` the macros.

pub use remat_derive::{checkpoint, remat, Capture};
pub use remat_runtime::{
    autocast, checkpoint, current_saved_tensor_info, is_placeholder, is_recomputing,
    recompute_needs_tensor, region, saved_tensors_hooks, AutocastGuard, BufferStateHook, Capture,
    Checkpoint, CheckpointInputs, Determinism, Error, Opaque, OutputItem, Policy,
    RecomputableClosure, RecomputeStateHook, Region, RegionInput, RegionOutput, Result,
    RngStateHook, SavedTensorInfo, SavedTensorKind, SavedTensorsHooks, Shared, TensorHooks,
};
pub use remat_runtime::{autograd, diagnostics, nn, planner, storage, Tensor};
pub use tch;

#[doc(hidden)]
pub use remat_runtime::__private;

/// What model code usually needs: the runtime's entry points, the macros
/// (`remat!`, `#[checkpoint]`, `#[derive(Capture)]`), `Tensor`, and the
/// memory report a checkpoint's forward can ask for.
///
/// ```
/// use remat::prelude::*;
/// assert!(!is_recomputing());
/// ```
pub mod prelude {
    pub use crate::diagnostics::memory_report;
    pub use crate::{
        autocast, checkpoint, is_placeholder, is_recomputing, recompute_needs_tensor, region,
        remat, BufferStateHook, Capture, Determinism, Policy, RecomputeStateHook, RngStateHook,
        Tensor,
    };
}
