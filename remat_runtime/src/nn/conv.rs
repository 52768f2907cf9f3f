//! Convolutions, capturable (tch's `Conv` keeps its configuration private).

use crate::capture::Capture;
use std::borrow::Borrow;
use tch::nn::{ConvConfig, ConvConfigND, Module, PaddingMode, Path};
use tch::Tensor;

/// tch's `Conv`, capturable: variables `weight` and `bias`.
#[derive(Debug)]
pub struct Conv<ND> {
    /// The kernel, `[out, in / groups, k...]`.
    pub ws: Tensor,
    /// The bias (`None` without bias).
    pub bs: Option<Tensor>,
    reversed_padding_repeated_twice: Vec<i64>,
    config: ConvConfigND<ND>,
}

/// A 1D convolution.
pub type Conv1D = Conv<[i64; 1]>;
/// A 2D convolution.
pub type Conv2D = Conv<[i64; 2]>;
/// A 3D convolution.
pub type Conv3D = Conv<[i64; 3]>;

/// A convolution with per-dimension sizes, as `tch::nn::conv`.
///
/// ```
/// use remat_runtime::nn;
/// use tch::nn::Module;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let c = nn::conv(vs.root() / "c", 2, 3, [3, 1], Default::default());
/// let x = tch::Tensor::randn([1, 2, 5, 5], tch::kind::FLOAT_CPU);
/// assert_eq!(c.forward(&x).size(), [1, 3, 3, 5]);
/// ```
pub fn conv<'a, ND, T>(
    vs: T,
    in_dim: i64,
    out_dim: i64,
    ksizes: ND,
    config: ConvConfigND<ND>,
) -> Conv<ND>
where
    ND: AsRef<[i64]> + Copy,
    T: Borrow<Path<'a>>,
{
    let made = tch::nn::conv(vs, in_dim, out_dim, ksizes, config);
    let padding = config.padding.as_ref();
    let reversed: Vec<i64> = padding.iter().rev().copied().collect();
    Conv {
        ws: made.ws,
        bs: made.bs,
        reversed_padding_repeated_twice: [reversed.clone(), reversed].concat(),
        config,
    }
}

fn nd<const N: usize>(c: ConvConfig) -> ConvConfigND<[i64; N]> {
    ConvConfigND {
        stride: [c.stride; N],
        padding: [c.padding; N],
        dilation: [c.dilation; N],
        groups: c.groups,
        bias: c.bias,
        ws_init: c.ws_init,
        bs_init: c.bs_init,
        padding_mode: c.padding_mode,
    }
}

/// A 1D convolution, as `tch::nn::conv1d`.
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::Module;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let c = nn::conv1d(vs.root() / "c", 2, 3, 3, Default::default());
/// let x = tch::Tensor::randn([1, 2, 7], tch::kind::FLOAT_CPU);
/// assert!(c.capture().forward(&x).equal(&c.forward(&x)));
/// ```
pub fn conv1d<'a, T: Borrow<Path<'a>>>(vs: T, i: i64, o: i64, k: i64, c: ConvConfig) -> Conv1D {
    conv(vs, i, o, [k], nd(c))
}

/// A 2D convolution, as `tch::nn::conv2d`.
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::Module;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let cfg = nn::ConvConfig { padding: 1, bias: false, ..Default::default() };
/// let c = nn::conv2d(vs.root() / "conv1", 3, 8, 3, cfg);
/// let x = tch::Tensor::randn([2, 3, 8, 8], tch::kind::FLOAT_CPU);
/// assert!(c.capture().forward(&x).equal(&c.forward(&x)));
/// assert!(vs.variables().contains_key("conv1.weight"));
/// ```
pub fn conv2d<'a, T: Borrow<Path<'a>>>(vs: T, i: i64, o: i64, k: i64, c: ConvConfig) -> Conv2D {
    conv(vs, i, o, [k, k], nd(c))
}

/// A 3D convolution, as `tch::nn::conv3d`.
///
/// ```
/// use remat_runtime::nn;
/// use tch::nn::Module;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let c = nn::conv3d(vs.root() / "c", 1, 2, 2, Default::default());
/// let x = tch::Tensor::randn([1, 1, 3, 3, 3], tch::kind::FLOAT_CPU);
/// assert_eq!(c.forward(&x).size(), [1, 2, 2, 2, 2]);
/// ```
pub fn conv3d<'a, T: Borrow<Path<'a>>>(vs: T, i: i64, o: i64, k: i64, c: ConvConfig) -> Conv3D {
    conv(vs, i, o, [k, k, k], nd(c))
}

macro_rules! conv_forward {
    ($n:literal, $op:ident) => {
        impl Module for Conv<[i64; $n]> {
            fn forward(&self, xs: &Tensor) -> Tensor {
                let (xs, padding) = match self.config.padding_mode {
                    PaddingMode::Zeros => (xs.shallow_clone(), self.config.padding),
                    p => (p.pad(xs, &self.reversed_padding_repeated_twice), [0; $n]),
                };
                xs.$op(
                    &self.ws,
                    self.bs.as_ref(),
                    self.config.stride,
                    padding,
                    self.config.dilation,
                    self.config.groups,
                )
            }
        }
    };
}
conv_forward!(1, conv1d);
conv_forward!(2, conv2d);
conv_forward!(3, conv3d);

impl<ND: Copy + Send + 'static> Capture for Conv<ND> {
    fn capture(&self) -> Self {
        Conv {
            ws: self.ws.capture(),
            bs: self.bs.capture(),
            reversed_padding_repeated_twice: self.reversed_padding_repeated_twice.clone(),
            config: self.config,
        }
    }
}
