//! Models written for the planner's peak contract (docs/planner.md, "The
//! peak contract"): besides the reference model, a LLaMA-style transformer
//! ([`transformer`]), a UNet-shaped convolutional model whose down blocks'
//! outputs skip to its up blocks ([`unet`]) and a model whose blocks differ
//! ([`mixed`]). Each holds its parameters and its batch, and runs its
//! forward with `auto()` checkpoints whose `Policy::Auto` regions a plan
//! decides.
//!
//! Invariant: parameters and data come from [`values`], never from
//! libtorch's global generator, so a model is the same in every process and
//! on every thread.

pub mod mixed;
pub mod transformer;
pub mod unet;

use crate::model::{Config, ModelPolicy, Setup};
use tch::{Kind, Tensor};

/// A model the planner plans: its forward (returning the loss) and its
/// parameters.
pub trait Planned {
    /// What the tables call it.
    fn name(&self) -> String;
    /// The forward with `auto()` checkpoints, returning the loss.
    fn loss(&self) -> Tensor;
    /// Its parameters (leaves that require grad).
    fn parameters(&self) -> Vec<Tensor>;
}

/// Deterministic values in `[-scale, scale]` of shape `shape`, distinct per
/// `seed`: `scale * sin(1.7 i + seed)` over the elements.
///
/// ```
/// use remat_reference::planned::values;
/// let v = values(&[2, 3], 1.0, 0.5);
/// assert_eq!(v.size(), [2, 3]);
/// assert!(v.equal(&values(&[2, 3], 1.0, 0.5)));
/// ```
pub fn values(shape: &[i64], seed: f64, scale: f64) -> Tensor {
    let n: i64 = shape.iter().product();
    ((Tensor::arange(n, tch::kind::FLOAT_CPU) * 1.7 + seed).sin() * scale).view(shape)
}

/// A parameter: [`values`] that require grad.
fn parameter(shape: &[i64], seed: f64, scale: f64) -> Tensor {
    values(shape, seed, scale).set_requires_grad(true)
}

/// A norm's weight: [`values`] about 1.
fn norm_weight(n: i64, seed: f64) -> Tensor {
    (values(&[n], seed, 0.1) + 1.0).set_requires_grad(true)
}

/// The reference model (docs/reference-model.md) under `ModelPolicy::Auto`.
pub struct Reference {
    /// What the tables call it (`small`, `medium`, ...).
    pub name: &'static str,
    /// The model and its batch.
    pub setup: Setup,
}

impl Reference {
    /// The reference model of configuration `cfg`.
    ///
    /// ```
    /// use remat_reference::planned::{Planned, Reference};
    /// let m = Reference::new("small", remat_reference::SMALL);
    /// assert_eq!(m.name(), "small");
    /// ```
    pub fn new(name: &'static str, cfg: Config) -> Reference {
        Reference {
            name,
            setup: Setup::new(cfg),
        }
    }
}

impl Planned for Reference {
    fn name(&self) -> String {
        self.name.to_string()
    }

    fn loss(&self) -> Tensor {
        self.setup.loss(ModelPolicy::Auto)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.setup
            .model
            .named_parameters()
            .into_iter()
            .map(|(_, p)| p.shallow_clone())
            .collect()
    }
}

/// Mean squared error of `y` against `target`.
fn mse(y: &Tensor, target: &Tensor) -> Tensor {
    (y - target).square().mean(Kind::Float)
}
