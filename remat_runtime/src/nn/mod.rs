//! `remat::nn`: tch's `nn` with every module capturable by a checkpoint.
//!
//! Everything of `tch::nn` is re-exported; the modules below replace tch's
//! with the same constructors, the same variable names in the `VarStore`
//! (so saved weights load either way), the same forward ops (bit for bit),
//! and [`Capture`](crate::Capture): a model written in tch's `nn` style
//! changes one import (`use remat::nn;` for `use tch::nn;`), tch's
//! signatures included (`-> nn::FuncT<'a>`, fields of type
//! `nn::Func<'static>`). Where it takes more than the import, the compiler
//! says so, and the change is local:
//!
//! - **A helper returning `impl ModuleT`** (or `impl Module`) hides the
//!   concrete type and with it `Capture` (`capture` not found, or "cannot be
//!   captured by a checkpoint"). Return `impl ModuleT + Capture` or the
//!   concrete type (`nn::SequentialT`), or wrap the call:
//!   `Shared::new(helper(..))`, whose captures share the one module. In a
//!   crate of edition 2024, where such a return type captures the borrow of
//!   the `nn::Path`, write `impl ModuleT + use<>` so that the module can
//!   move into a checkpoint (the example below is edition 2021, as tch's
//!   code is).
//! - **A closure layer that borrows** (`nn::func(|x| x.matmul(&self.w))`) is
//!   refused ([`LayerFn`]): replay runs after the code that built the model
//!   returned, so the closure owns what it uses (`move` a shallow clone in).
//!   Hence also: only `Func<'static>` and `FuncT<'static>` are `Capture`.
//! - **A module remat does not mirror** (`ConvTranspose*`, the RNNs, a module
//!   of your own without `Capture`, a `Box<dyn ModuleT>`): wrap it in
//!   [`Shared`], whose captures share the one module, and which is a
//!   `ModuleT` when the module is one: `seq_t().add(Shared::new(m))`, and in
//!   `seq()` (which takes `Module`s) `add_fn(move |xs| m.forward(xs))`.
//!
//! ```edition2021
//! use remat_runtime::{checkpoint, nn::{self, ModuleT, Shared}, Capture};
//!
//! fn stem(vs: &nn::Path) -> impl ModuleT + Capture {
//!     nn::seq_t().add(nn::conv2d(vs / "conv", 2, 2, 3, Default::default()))
//! }
//!
//! fn stem_as_tch_writes_it(vs: &nn::Path) -> impl ModuleT {
//!     nn::seq_t().add(nn::conv2d(vs / "conv", 2, 2, 3, Default::default()))
//! }
//!
//! let vs = nn::VarStore::new(tch::Device::Cpu);
//! let x = tch::Tensor::ones([1, 2, 5, 5], tch::kind::FLOAT_CPU).set_requires_grad(true);
//! let owned = stem(&(vs.root() / "a")).capture();
//! let a = checkpoint("a").call(&x, move |x| owned.forward_t(&x, true));
//! let shared = Shared::new(stem_as_tch_writes_it(&(vs.root() / "b")));
//! let b = checkpoint("b").call(&x, move |x| shared.forward_t(&x, true));
//! (a + b).sum(tch::Kind::Float).backward();
//! ```
//!
//! Invariant: each module's constructor creates its variables through tch's
//! own constructor (same names, same initialisation, same draws from the
//! generator), and its forward calls the same ops as tch's, in order.

mod batch_norm;
mod conv;
mod embedding;
mod func;
mod group_norm;
mod layer_norm;
mod sequential;

pub use tch::nn::*;

pub use crate::shared::Shared;
pub use batch_norm::{batch_norm1d, batch_norm2d, batch_norm3d, BatchNorm};
pub use conv::{conv, conv1d, conv2d, conv3d, Conv, Conv1D, Conv2D, Conv3D};
pub use embedding::{embedding, Embedding};
pub use func::{func, func_t, Func, FuncT, LayerFn, LayerFnT};
pub use group_norm::{group_norm, GroupNorm};
pub use layer_norm::{layer_norm, LayerNorm};
pub use sequential::{seq, seq_t, CaptureModule, CaptureModuleT, Sequential, SequentialT};
