//! Batch normalization that is replay-aware: its running statistics are
//! updated once per forward, whether or not a checkpoint replays it.
//!
//! Invariant: on replay (`is_recomputing()`), train mode computes with the
//! batch's statistics exactly as the forward did (so the output and what it
//! saves for backward are the same), but updates throwaway copies of the
//! running statistics, never the module's own (docs/semantics.md, rule H6).

use crate::capture::Capture;
use crate::checkpointing::frame::is_recomputing;
use std::borrow::Borrow;
use tch::nn::{BatchNormConfig, ModuleT, Path};
use tch::Tensor;

/// tch's `BatchNorm`, capturable and replay-aware: variables `weight`,
/// `bias`, `running_mean`, `running_var`. A checkpoint that replays it does
/// not update the running statistics a second time, under every policy:
/// after each step they are bit-identical to the same model's without remat,
/// with no state hook needed (in a `Save` region replay skips it anyway).
#[derive(Debug)]
pub struct BatchNorm {
    config: BatchNormConfig,
    /// The running mean (a buffer: no gradient).
    pub running_mean: Tensor,
    /// The running variance (a buffer: no gradient).
    pub running_var: Tensor,
    /// The scale (`None` without affine).
    pub ws: Option<Tensor>,
    /// The shift (`None` without affine).
    pub bs: Option<Tensor>,
    /// The number of spatial dimensions (1, 2 or 3).
    pub nd: usize,
}

fn batch_norm<'a, T: Borrow<Path<'a>>>(
    vs: T,
    nd: usize,
    out_dim: i64,
    config: BatchNormConfig,
) -> BatchNorm {
    let made = match nd {
        1 => tch::nn::batch_norm1d(vs, out_dim, config),
        2 => tch::nn::batch_norm2d(vs, out_dim, config),
        _ => tch::nn::batch_norm3d(vs, out_dim, config),
    };
    BatchNorm {
        config,
        running_mean: made.running_mean,
        running_var: made.running_var,
        ws: made.ws,
        bs: made.bs,
        nd,
    }
}

/// A batch norm over `[N, C]` or `[N, C, L]` inputs, as `tch::nn::batch_norm1d`.
///
/// ```
/// use remat_runtime::nn;
/// use tch::nn::ModuleT;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let bn = nn::batch_norm1d(vs.root() / "bn", 3, Default::default());
/// let x = tch::Tensor::randn([4, 3], tch::kind::FLOAT_CPU);
/// assert_eq!(bn.forward_t(&x, true).size(), [4, 3]);
/// ```
pub fn batch_norm1d<'a, T: Borrow<Path<'a>>>(
    vs: T,
    out_dim: i64,
    config: BatchNormConfig,
) -> BatchNorm {
    batch_norm(vs, 1, out_dim, config)
}

/// A batch norm over `[N, C, H, W]` inputs, as `tch::nn::batch_norm2d`.
///
/// ```
/// use remat_runtime::{checkpoint, nn, Capture};
/// use tch::nn::ModuleT;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let bn = nn::batch_norm2d(vs.root() / "bn1", 3, Default::default());
/// let x = tch::Tensor::randn([4, 3, 2, 2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let owned = bn.capture();
/// let y = checkpoint("block").call(&x, move |x| owned.forward_t(&x, true).relu());
/// let after_forward = bn.running_mean.copy();
/// y.sum(tch::Kind::Float).backward(); // replays the batch norm...
/// assert!(bn.running_mean.equal(&after_forward)); // ...without updating it again
/// ```
pub fn batch_norm2d<'a, T: Borrow<Path<'a>>>(
    vs: T,
    out_dim: i64,
    config: BatchNormConfig,
) -> BatchNorm {
    batch_norm(vs, 2, out_dim, config)
}

/// A batch norm over `[N, C, D, H, W]` inputs, as `tch::nn::batch_norm3d`.
///
/// ```
/// use remat_runtime::nn;
/// use tch::nn::ModuleT;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let bn = nn::batch_norm3d(vs.root() / "bn", 2, Default::default());
/// let x = tch::Tensor::randn([2, 2, 2, 2, 2], tch::kind::FLOAT_CPU);
/// assert_eq!(bn.forward_t(&x, false).size(), [2, 2, 2, 2, 2]);
/// ```
pub fn batch_norm3d<'a, T: Borrow<Path<'a>>>(
    vs: T,
    out_dim: i64,
    config: BatchNormConfig,
) -> BatchNorm {
    batch_norm(vs, 3, out_dim, config)
}

impl ModuleT for BatchNorm {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let dim = xs.dim();
        if self.nd == 1 && dim != 2 && dim != 3 {
            panic!(
                "as nd={}, expected an input tensor with 2 or 3 dims, got {} ({:?})",
                self.nd,
                dim,
                xs.size()
            )
        }
        if self.nd > 1 && dim != self.nd + 2 {
            panic!(
                "as nd={}, expected an input tensor with {} dims, got {} ({:?})",
                self.nd,
                self.nd + 2,
                dim,
                xs.size()
            )
        }
        // The forward already updated the statistics: replay updates copies
        // (same shapes and values, so it saves what the forward saved).
        let scratch;
        let (mean, var) = if train && is_recomputing() {
            scratch = (self.running_mean.copy(), self.running_var.copy());
            (&scratch.0, &scratch.1)
        } else {
            (&self.running_mean, &self.running_var)
        };
        Tensor::batch_norm(
            xs,
            self.ws.as_ref(),
            self.bs.as_ref(),
            Some(mean),
            Some(var),
            train,
            self.config.momentum,
            self.config.eps,
            self.config.cudnn_enabled,
        )
    }
}

impl Capture for BatchNorm {
    fn capture(&self) -> Self {
        BatchNorm {
            config: self.config,
            running_mean: self.running_mean.capture(),
            running_var: self.running_var.capture(),
            ws: self.ws.capture(),
            bs: self.bs.capture(),
            nd: self.nd,
        }
    }
}
