//! Sequences of layers, capturable: every layer is itself capturable, and a
//! capture of the sequence captures each layer.
//!
//! Invariant: the forward folds the layers in order, as tch's `Sequential`
//! and `SequentialT` do.

use crate::capture::Capture;
use crate::nn::func::{func, func_t, LayerFn, LayerFnT};
use tch::nn::{Module, ModuleT};
use tch::Tensor;

/// A [`Module`] that can be captured behind a `Box`: what a [`Sequential`]
/// holds. Every `Module + Capture` is one.
///
/// ```
/// use remat_runtime::nn::{self, CaptureModule};
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let layer: Box<dyn CaptureModule> = Box::new(nn::linear(vs.root(), 2, 2, Default::default()));
/// let _same = layer.capture_boxed();
/// ```
pub trait CaptureModule: Module {
    /// A boxed capture of this module.
    fn capture_boxed(&self) -> Box<dyn CaptureModule>;
}

impl<M: Module + Capture> CaptureModule for M {
    fn capture_boxed(&self) -> Box<dyn CaptureModule> {
        Box::new(self.capture())
    }
}

/// A [`ModuleT`] that can be captured behind a `Box`: what a [`SequentialT`]
/// holds. Every `ModuleT + Capture` is one.
///
/// ```
/// use remat_runtime::nn::{self, CaptureModuleT};
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let layer: Box<dyn CaptureModuleT> = Box::new(nn::batch_norm1d(vs.root(), 2, Default::default()));
/// let _same = layer.capture_boxed_t();
/// ```
pub trait CaptureModuleT: ModuleT {
    /// A boxed capture of this module.
    fn capture_boxed_t(&self) -> Box<dyn CaptureModuleT>;
}

impl<M: ModuleT + Capture> CaptureModuleT for M {
    fn capture_boxed_t(&self) -> Box<dyn CaptureModuleT> {
        Box::new(self.capture())
    }
}

/// `xs` through every layer in order; the input itself (a shallow clone)
/// when there are none, as in tch.
fn fold<L: ?Sized>(
    layers: &[Box<L>],
    xs: &Tensor,
    apply: impl Fn(&L, &Tensor) -> Tensor,
) -> Tensor {
    match layers.split_first() {
        None => xs.shallow_clone(),
        Some((first, rest)) => rest
            .iter()
            .fold(apply(first, xs), |xs, layer| apply(layer, &xs)),
    }
}

/// The outputs of the first `n` layers (all when `None`), in order; tch's
/// `forward_all`, whose first layer always runs.
fn fold_all<L: ?Sized>(
    layers: &[Box<L>],
    xs: &Tensor,
    n: Option<usize>,
    apply: impl Fn(&L, &Tensor) -> Tensor,
) -> Vec<Tensor> {
    let Some((first, _)) = layers.split_first() else {
        return vec![xs.shallow_clone()];
    };
    let n = n.unwrap_or(layers.len());
    let mut all = vec![];
    let out = layers
        .iter()
        .take(n)
        .skip(1)
        .fold(apply(first, xs), |xs, layer| {
            let out = apply(layer, &xs);
            all.push(xs);
            out
        });
    all.push(out);
    all
}

/// The methods both sequences have, written once: `$ty` holds layers of
/// the module trait `$module`, and `$ctor` is its constructor.
macro_rules! sequence_methods {
    ($ty:ident, $ctor:literal, $module:ident) => {
        impl $ty {
            /// The number of layers.
            ///
            /// ```
            #[doc = concat!("assert_eq!(remat_runtime::nn::", $ctor, "().len(), 0);")]
            /// ```
            pub fn len(&self) -> i64 {
                self.layers.len() as i64
            }

            /// Whether there are no layers.
            ///
            /// ```
            #[doc = concat!("assert!(remat_runtime::nn::", $ctor, "().is_empty());")]
            /// ```
            pub fn is_empty(&self) -> bool {
                self.layers.is_empty()
            }

            /// Appends a layer.
            ///
            /// ```
            #[doc = concat!("let s = remat_runtime::nn::", $ctor, "().add(remat_runtime::nn::func(|x| x.relu()));")]
            /// assert_eq!(s.len(), 1);
            /// ```
            #[allow(clippy::should_implement_trait)]
            pub fn add<M: $module + Capture>(mut self, layer: M) -> Self {
                self.layers.push(Box::new(layer));
                self
            }

            /// Appends a layer defined by a closure (which owns what it uses).
            ///
            /// ```
            #[doc = concat!("let s = remat_runtime::nn::", $ctor, "().add_fn(|x| x.relu());")]
            /// assert_eq!(s.len(), 1);
            /// ```
            pub fn add_fn<F>(self, f: F) -> Self
            where
                F: Fn(&Tensor) -> Tensor,
                F: LayerFn,
            {
                self.add(func(f))
            }
        }
    };
}

/// tch's `Sequential`, capturable.
#[derive(Debug)]
pub struct Sequential {
    layers: Vec<Box<dyn CaptureModule>>,
}

/// An empty sequence of layers, as `tch::nn::seq`.
///
/// ```
/// use remat_runtime::{checkpoint, nn, Capture};
/// use tch::nn::Module;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let mlp = nn::seq()
///     .add(nn::linear(vs.root() / "fc1", 4, 8, Default::default()))
///     .add_fn(|xs| xs.relu())
///     .add(nn::linear(vs.root() / "fc2", 8, 4, Default::default()));
/// let x = tch::Tensor::randn([2, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let owned = mlp.capture();
/// let y = checkpoint("mlp").call(&x, move |x| owned.forward(&x));
/// assert!(y.equal(&mlp.forward(&x)));
/// ```
pub fn seq() -> Sequential {
    Sequential { layers: Vec::new() }
}

sequence_methods!(Sequential, "seq", Module);

impl Sequential {
    /// The outputs of the first `n` layers (all by default), in order.
    ///
    /// ```
    /// use remat_runtime::nn;
    /// let s = nn::seq().add_fn(|x| x * 2).add_fn(|x| x + 1);
    /// let outs = s.forward_all(&tch::Tensor::from(1.0), None);
    /// assert_eq!(outs.iter().map(|t| f64::try_from(t).unwrap()).collect::<Vec<_>>(), [2.0, 3.0]);
    /// ```
    pub fn forward_all(&self, xs: &Tensor, n: Option<usize>) -> Vec<Tensor> {
        fold_all(&self.layers, xs, n, |layer, xs| layer.forward(xs))
    }
}

impl Module for Sequential {
    fn forward(&self, xs: &Tensor) -> Tensor {
        fold(&self.layers, xs, |layer, xs| layer.forward(xs))
    }
}

impl Capture for Sequential {
    fn capture(&self) -> Self {
        Sequential {
            layers: self.layers.iter().map(|l| l.capture_boxed()).collect(),
        }
    }
}

/// tch's `SequentialT` (layers that know train mode), capturable.
#[derive(Debug)]
pub struct SequentialT {
    layers: Vec<Box<dyn CaptureModuleT>>,
}

/// An empty sequence of train-aware layers, as `tch::nn::seq_t`.
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::ModuleT;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let block = nn::seq_t()
///     .add(nn::conv2d(vs.root() / "conv", 2, 2, 3, Default::default()))
///     .add(nn::batch_norm2d(vs.root() / "bn", 2, Default::default()))
///     .add_fn_t(|xs, train| xs.dropout(0.1, train));
/// let x = tch::Tensor::randn([2, 2, 5, 5], tch::kind::FLOAT_CPU);
/// assert_eq!(block.capture().forward_t(&x, false).size(), [2, 2, 3, 3]);
/// ```
pub fn seq_t() -> SequentialT {
    SequentialT { layers: Vec::new() }
}

sequence_methods!(SequentialT, "seq_t", ModuleT);

impl SequentialT {
    /// Appends a train-aware layer defined by a closure.
    ///
    /// ```
    /// let s = remat_runtime::nn::seq_t().add_fn_t(|x, train| x.dropout(0.5, train));
    /// assert_eq!(s.len(), 1);
    /// ```
    pub fn add_fn_t<F>(self, f: F) -> Self
    where
        F: Fn(&Tensor, bool) -> Tensor,
        F: LayerFnT,
    {
        self.add(func_t(f))
    }

    /// The outputs of the first `n` layers (all by default), in order.
    ///
    /// ```
    /// use remat_runtime::nn;
    /// let s = nn::seq_t().add_fn(|x| x * 2).add_fn(|x| x + 1);
    /// assert_eq!(s.forward_all_t(&tch::Tensor::from(1.0), false, None).len(), 2);
    /// ```
    pub fn forward_all_t(&self, xs: &Tensor, train: bool, n: Option<usize>) -> Vec<Tensor> {
        fold_all(&self.layers, xs, n, |layer, xs| layer.forward_t(xs, train))
    }
}

impl ModuleT for SequentialT {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        fold(&self.layers, xs, |layer, xs| layer.forward_t(xs, train))
    }
}

impl Capture for SequentialT {
    fn capture(&self) -> Self {
        SequentialT {
            layers: self.layers.iter().map(|l| l.capture_boxed_t()).collect(),
        }
    }
}
