//! Layer normalization, capturable (tch's `LayerNorm` keeps its
//! configuration private).

use crate::capture::Capture;
use std::borrow::Borrow;
use tch::nn::{LayerNormConfig, Module, Path};
use tch::Tensor;

/// tch's `LayerNorm`, capturable: variables `weight` and `bias`.
#[derive(Debug)]
pub struct LayerNorm {
    config: LayerNormConfig,
    /// The scale (`None` without elementwise affine).
    pub ws: Option<Tensor>,
    /// The shift (`None` without elementwise affine).
    pub bs: Option<Tensor>,
    /// The normalized trailing shape.
    pub normalized_shape: Vec<i64>,
}

/// A layer norm over the trailing `normalized_shape`, as `tch::nn::layer_norm`.
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::Module;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let ln = nn::layer_norm(vs.root() / "ln1", vec![4], Default::default());
/// let x = tch::Tensor::randn([2, 4], tch::kind::FLOAT_CPU);
/// assert!(ln.capture().forward(&x).equal(&ln.forward(&x)));
/// assert!(vs.variables().contains_key("ln1.weight"));
/// ```
pub fn layer_norm<'a, T: Borrow<Path<'a>>>(
    vs: T,
    normalized_shape: Vec<i64>,
    config: LayerNormConfig,
) -> LayerNorm {
    let tch::nn::LayerNorm {
        ws,
        bs,
        normalized_shape,
        ..
    } = tch::nn::layer_norm(vs, normalized_shape, config);
    LayerNorm {
        config,
        ws,
        bs,
        normalized_shape,
    }
}

impl Module for LayerNorm {
    fn forward(&self, xs: &Tensor) -> Tensor {
        Tensor::layer_norm(
            xs,
            self.normalized_shape.as_slice(),
            self.ws.as_ref(),
            self.bs.as_ref(),
            self.config.eps,
            self.config.cudnn_enabled,
        )
    }
}

impl Capture for LayerNorm {
    fn capture(&self) -> Self {
        LayerNorm {
            config: self.config,
            ws: self.ws.capture(),
            bs: self.bs.capture(),
            normalized_shape: self.normalized_shape.clone(),
        }
    }
}
