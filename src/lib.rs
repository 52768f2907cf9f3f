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
//! `docs/mental-model.md` explains the runtime, `docs/dsl.md` the macros.

pub use remat_derive::{checkpoint, remat, Capture};
pub use remat_runtime::*;
pub use tch;

/// What model code usually needs: the runtime's entry points, the macros
/// (`remat!`, `#[checkpoint]`, `#[derive(Capture)]`) and `Tensor`.
///
/// ```
/// use remat::prelude::*;
/// assert!(!is_recomputing());
/// ```
pub mod prelude {
    pub use crate::{
        checkpoint, is_placeholder, is_recomputing, recompute_needs_tensor, region, remat,
        BufferStateHook, Capture, Determinism, Policy, RecomputeStateHook, RngStateHook, Tensor,
    };
}
