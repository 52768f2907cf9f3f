//! remat: explicit, source-level activation rematerialization for libtorch.
//!
//! A checkpoint drops the activations of the code inside it after the
//! forward and rebuilds them in backward by running that code again; the
//! calls inside it are regions marked `save` (keep what they save) or
//! `recompute`. The macros (`remat!`, `#[checkpoint]`) check at compile
//! time that replayed code reads only values that replay rebuilds.
//!
//! This crate re-exports the runtime ([`remat_runtime`]) and the macros
//! ([`remat_derive`]). Most code needs only the prelude:
//!
//! ```
//! use remat::prelude::*;
//!
//! let x = Tensor::ones([2, 2], tch::kind::FLOAT_CPU).set_requires_grad(true);
//! let y = checkpoint("block").call(&x, |x| {
//!     let h: Saved<Tensor> = region("double", Policy::Save).call_saved(&x, |x| x * 2);
//!     needs(h).sin() // a save output is read after `needs` marks it
//! });
//! y.sum(tch::Kind::Float).backward();
//! ```
//!
//! The root holds what model code uses: checkpoints and regions, their
//! policies, save outputs ([`Saved`], [`needs`]), state and saved-tensor
//! hooks, the macros, and errors. The rest is in named modules: [`io`] (the
//! traits of what regions and checkpoints take and return),
//! [`diagnostics`], [`planner`], [`autograd`], [`storage`] and [`nn`].
//!
//! # Building
//!
//! remat builds on [`tch`] 0.26, which needs libtorch 2.13.0, or on tch 0.24,
//! which needs libtorch 2.11.0 (the lock file picks; there is no tch for
//! 2.12). remat finds libtorch exactly as tch's `torch-sys` does, from
//! environment variables:
//!
//! - `LIBTORCH`: the folder holding libtorch's `lib/` and `include/` (a
//!   libtorch download, or the `torch/` folder of the PyPI wheel
//!   `torch==2.13.0` or `torch==2.11.0`), with `LIBTORCH_CXX11_ABI=0` only for a libtorch
//!   built with the pre-C++11 ABI;
//! - or `LIBTORCH_USE_PYTORCH=1` with a Python environment activated that
//!   has `torch==2.13.0` (or `torch==2.11.0`) installed.
//!
//! A build without either fails with a message naming them. Binaries also
//! need libtorch's shared libraries at run time; two lines in your crate's
//! `build.rs` give them an rpath to the folder remat was built against:
//!
//! ```no_run
//! // build.rs
//! fn main() {
//!     if let Ok(lib) = std::env::var("DEP_REMAT_LIBTORCH_LIB") {
//!         println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
//!     }
//! }
//! ```
//!
//! # Features
//!
//! - `cuda`: keeps `libtorch_cuda` linked, so that CUDA devices are visible
//!   (without it the linker drops the library: nothing references it
//!   directly). A binary crate of yours also prints
//!   `-Wl,--no-as-needed`, `-ltorch_cuda` and `-Wl,--as-needed` as link
//!   arguments in its `build.rs`.
//! - `doc-only`: builds without libtorch, for documentation (docs.rs uses
//!   it): tch's `doc-only`, and the C++ bridge is neither compiled nor
//!   linked. Nothing built this way can run.
//!
//! # Guides
//!
//! In the repository, under `docs/`:
//! [the mental model](https://github.com/remat-rs/remat/blob/main/docs/mental-model.md)
//! (forward, recomputation and backward, what is kept, every run-time error),
//! [the rules](https://github.com/remat-rs/remat/blob/main/docs/semantics.md)
//! (the runtime's contract, numbered),
//! [the macros](https://github.com/remat-rs/remat/blob/main/docs/dsl.md)
//! (`remat!`, `#[checkpoint]`, `remat::nn` and every compile error),
//! [testing a checkpointed model](https://github.com/remat-rs/remat/blob/main/docs/testing.md),
//! [diagnostics](https://github.com/remat-rs/remat/blob/main/docs/diagnostics.md),
//! [the memory-budget planner](https://github.com/remat-rs/remat/blob/main/docs/planner.md),
//! [performance](https://github.com/remat-rs/remat/blob/main/docs/performance.md),
//! [determinism](https://github.com/remat-rs/remat/blob/main/docs/determinism.md),
//! [the public API](https://github.com/remat-rs/remat/blob/main/docs/api.md)
//! and [the architecture](https://github.com/remat-rs/remat/blob/main/docs/architecture.md).
//! The [changelog](https://github.com/remat-rs/remat/blob/main/CHANGELOG.md)
//! states what each release changes and the semver policy.

#![deny(unsafe_code)]
// The crate docs show a build script, whose `fn main` is the point.
#![allow(clippy::needless_doctest_main)]

pub use remat_derive::{checkpoint, remat, Capture};
pub use remat_runtime::{
    autocast, checkpoint, current_saved_tensor_info, is_recomputing, name_scope, needs,
    recompute_needs_tensor, region, saved_tensors_hooks, AutocastGuard, BufferStateHook, Capture,
    Checkpoint, Determinism, Error, Opaque, Policy, RecomputableClosure, RecomputeStateHook,
    Region, Result, RngStateHook, Saved, SavedTensorInfo, SavedTensorKind, SavedTensorsHooks,
    Shared, TensorHooks,
};
pub use remat_runtime::{autograd, diagnostics, nn, planner, policies, storage, Tensor};
pub use tch;

#[doc(hidden)]
pub use remat_runtime::__private;

/// The traits of what regions and checkpoints take and return, which model
/// code meets in bounds and error messages more than it names: region
/// inputs and outputs ([`RegionInput`](io::RegionInput),
/// [`RegionArg`](io::RegionArg), [`RegionOutput`](io::RegionOutput),
/// [`OutputItem`](io::OutputItem)), checkpoint inputs and outputs
/// ([`CheckpointInputs`](io::CheckpointInputs),
/// [`CheckpointOutput`](io::CheckpointOutput),
/// [`CheckpointOutputItem`](io::CheckpointOutputItem)), what
/// [`needs`] takes ([`Needs`](io::Needs)), and
/// [`Arg`](io::Arg), one argument of a region call whose tuple of
/// arguments holds save outputs.
///
/// ```
/// use remat::io::RegionInput;
/// struct Pair(tch::Tensor, tch::Tensor);
/// impl RegionInput for Pair {
///     fn visit(&self, f: &mut dyn FnMut(&tch::Tensor)) {
///         f(&self.0);
///         f(&self.1);
///     }
/// }
/// ```
pub mod io {
    pub use remat_derive::RegionOutput;
    pub use remat_runtime::{
        Arg, CheckpointInputs, CheckpointOutput, CheckpointOutputItem, Needs, OutputItem,
        ReadableAfterNeeds, RegionArg, RegionInput, RegionOutput, SavedFields, SizeList, Token,
    };
}

/// What model code usually needs: the runtime's entry points, the macros
/// (`remat!`, `#[checkpoint]`, `#[derive(Capture)]`), `Tensor`, and the
/// memory report a checkpoint's forward can ask for.
///
/// ```
/// use remat::prelude::*;
/// assert!(!is_recomputing());
/// ```
pub mod prelude {
    pub use crate::autograd::is_placeholder;
    pub use crate::diagnostics::memory_report;
    pub use crate::{
        autocast, checkpoint, is_recomputing, name_scope, needs, recompute_needs_tensor, region,
        remat, BufferStateHook, Capture, Determinism, Policy, RecomputeStateHook, RngStateHook,
        Saved, Tensor,
    };
}
