//! Runtime of remat: checkpoint regions and the libtorch bridge they stand on.
//!
//! Most users depend on the `remat` crate, which re-exports this crate's
//! root together with the macros. The root holds what model code uses:
//!
//! - checkpoints ([`checkpoint`]) with `Save` and `Recompute` regions
//!   ([`region`]), placeholders for skipped outputs, saved-input rebuilding,
//!   state hooks ([`RecomputeStateHook`]) and determinism checks;
//! - saved-tensor hooks without Python ([`saved_tensors_hooks`]);
//! - the traits of what regions and checkpoints take and return
//!   ([`RegionInput`], [`CheckpointInputs`], [`Capture`], [`RegionOutput`]).
//!
//! The rest lives in named modules: [`diagnostics`] (trace, memory
//! reports, CUDA diagnostics), [`planner`] (a memory-budget planner),
//! [`autograd`] (custom autograd functions written in Rust, grad mode,
//! placeholders, RNG state, whether recomputation stops early),
//! [`storage`] (storage identity and version counters) and [`nn`] (tch's
//! `nn`, capturable by checkpoints).
//!
//! [docs/architecture.md](https://github.com/remat-rs/remat/blob/main/docs/architecture.md)
//! explains how these map onto libtorch;
//! [docs/semantics.md](https://github.com/remat-rs/remat/blob/main/docs/semantics.md)
//! states the rules.
//!
//! Features: `cuda` keeps `libtorch_cuda` linked, so that CUDA devices are
//! visible; `doc-only` builds without libtorch, for documentation only (tch's
//! `doc-only`; the build script compiles no C++ bridge, so nothing links).
//! The build finds libtorch as torch-sys does: `LIBTORCH`, or
//! `LIBTORCH_USE_PYTORCH=1` in a Python environment with `torch==2.13.0`
//! (or 2.11.0, with tch 0.24), and `LIBTORCH_CXX11_ABI`.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

// The folders are a one-way stack (docs/architecture.md, "Layout"; checked
// by tests/architecture.rs), from the bottom: the vocabulary (`policy`,
// `error`, `sync`, `fast_hash`), `bridge` (all unsafe code), `recorders`
// (what the mechanism writes) and `hooks` (what users plug in),
// `checkpointing` (the mechanism), `diagnostics` (what the runtime
// reports, read only), `planner` (plans), `policies` (tables, their files
// and a plan as a table).
#[macro_use]
mod arity;
mod autocast;
pub mod autograd;
#[allow(unsafe_code)]
mod bridge;
mod capture;
mod checkpointing;
pub mod diagnostics;
mod error;
mod fast_hash;
mod function;
mod generator_lock;
mod hooks;
mod io;
pub mod nn;
mod parts;
pub mod planner;
pub mod policies;
mod policy;
mod recorders;
mod saved;
mod shared;
pub mod storage;
mod sync;

pub use autocast::{autocast, AutocastGuard};
pub use capture::Capture;
pub use checkpointing::checkpoint::{checkpoint, Checkpoint};
pub use checkpointing::closure::RecomputableClosure;
pub use checkpointing::determinism::Determinism;
pub use checkpointing::frame::is_recomputing;
pub use checkpointing::name_scope::name_scope;
pub use checkpointing::needs::{needs, Needs};
pub use checkpointing::region::{recompute_needs_tensor, region, Region};
pub use checkpointing::saved_tensors::{saved_tensors_hooks, SavedTensorsHooks};
pub use checkpointing::tensor_hooks::{
    current_saved_tensor_info, SavedTensorInfo, SavedTensorKind, TensorHooks,
};
pub use error::{Error, Result};
pub use hooks::buffers::BufferStateHook;
pub use hooks::state_hooks::{RecomputeStateHook, RngStateHook};
pub use io::{CheckpointInputs, Opaque, OutputItem, RegionInput, RegionOutput};
pub use policy::Policy;
pub use saved::arg::{Arg, RegionArg, Token};
pub use saved::fields::SavedFields;
pub use saved::returned::{CheckpointOutput, CheckpointOutputItem};
pub use saved::unmarked::ReadableAfterNeeds;
pub use saved::{Saved, SizeList};
pub use shared::Shared;
pub use tch::Tensor;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
