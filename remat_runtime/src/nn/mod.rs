//! `remat::nn`: tch's `nn` with every module capturable by a checkpoint.
//!
//! Everything of `tch::nn` is re-exported; the modules below replace tch's
//! with the same constructors, the same variable names in the `VarStore`
//! (so saved weights load either way), the same forward ops (bit for bit),
//! and [`Capture`](crate::Capture): a model written in tch's `nn` style
//! changes one import (`use remat::nn;` for `use tch::nn;`).
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
