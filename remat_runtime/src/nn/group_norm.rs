//! Group normalization, capturable (tch's `GroupNorm` keeps its
//! configuration private).

use crate::capture::Capture;
use std::borrow::Borrow;
use tch::nn::{GroupNormConfig, Module, Path};
use tch::Tensor;

/// tch's `GroupNorm`, capturable: variables `weight` and `bias`.
#[derive(Debug)]
pub struct GroupNorm {
    config: GroupNormConfig,
    /// The scale (`None` without affine).
    pub ws: Option<Tensor>,
    /// The shift (`None` without affine).
    pub bs: Option<Tensor>,
    /// The number of groups.
    pub num_groups: i64,
    /// The number of channels.
    pub num_channels: i64,
}

/// A group norm, as `tch::nn::group_norm`.
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::Module;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let gn = nn::group_norm(vs.root() / "gn", 2, 4, Default::default());
/// let x = tch::Tensor::randn([2, 4, 3], tch::kind::FLOAT_CPU);
/// assert!(gn.capture().forward(&x).equal(&gn.forward(&x)));
/// ```
pub fn group_norm<'a, T: Borrow<Path<'a>>>(
    vs: T,
    num_groups: i64,
    num_channels: i64,
    config: GroupNormConfig,
) -> GroupNorm {
    let tch::nn::GroupNorm { ws, bs, .. } =
        tch::nn::group_norm(vs, num_groups, num_channels, config);
    GroupNorm {
        config,
        ws,
        bs,
        num_groups,
        num_channels,
    }
}

impl Module for GroupNorm {
    fn forward(&self, xs: &Tensor) -> Tensor {
        Tensor::group_norm(
            xs,
            self.num_groups,
            self.ws.as_ref(),
            self.bs.as_ref(),
            self.config.eps,
            self.config.cudnn_enabled,
        )
    }
}

impl Capture for GroupNorm {
    fn capture(&self) -> Self {
        GroupNorm {
            config: self.config,
            ws: self.ws.capture(),
            bs: self.bs.capture(),
            num_groups: self.num_groups,
            num_channels: self.num_channels,
        }
    }
}
