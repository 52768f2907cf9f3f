//! remat: explicit, source-level activation rematerialization for libtorch.
//!
//! This crate re-exports the runtime ([`remat_runtime`]) and the macros
//! ([`remat_derive`]).

pub use remat_derive::{checkpoint, remat, Capture};
pub use remat_runtime::*;
pub use tch;
