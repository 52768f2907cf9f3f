//! The reference model (docs/reference-model.md) as its users see
//! it: everything of `runtime_api` (sizes, parameters, ops, the blocks
//! written with the runtime API), [`Model::loss`] through the blocks written
//! with the macros, and the [`Setup`] the tests and the benchmark train on.
//!
//! The top of the crate's layers (`runtime_api`, then `macros`, then this
//! file): the macro version of the blocks builds on the runtime-API one (its
//! `Auto` policy runs those blocks), and the choice between them is made
//! here, so that neither of the two refers back to the other.
//!
//! ```
//! use remat_reference::model::{ModelPolicy, Setup, SMALL};
//! let setup = Setup::new(SMALL);
//! setup.loss(ModelPolicy::Selective).backward();
//! ```

pub use crate::runtime_api::{
    attention, attention_op, batch, batch_on, block_body, block_forward, ln, mlp, mlp_op, Block,
    Config, Model, ModelPolicy, DEEP, MEDIUM, POLICIES, SMALL, VOCAB,
};
use tch::Tensor;

impl Model {
    /// The loss under `policy`, with the blocks written once with the
    /// macros and the policy chosen at run time (`crate::macros`).
    ///
    /// ```
    /// use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let (tokens, targets) = batch(SMALL, 1);
    /// model.loss(&tokens, &targets, ModelPolicy::SaveMlp).backward();
    /// assert!(model.head_w.grad().defined());
    /// ```
    pub fn loss(&self, tokens: &Tensor, targets: &Tensor, policy: ModelPolicy) -> Tensor {
        crate::macros::loss(self, tokens, targets, policy)
    }
}

/// The reference model (parameters from seed 0) with its batch (seed 1):
/// what the tests and the benchmark train on, the same as the Python
/// peers'.
///
/// ```
/// use remat_reference::model::{batch, Setup, SMALL};
/// let setup = Setup::new(SMALL);
/// assert!(setup.tokens.equal(&batch(SMALL, 1).0));
/// ```
pub struct Setup {
    /// The model, parameters from seed 0.
    pub model: Model,
    /// The batch's tokens (seed 1), `[b, t]`.
    pub tokens: Tensor,
    /// The next byte of each token, `[b, t]`.
    pub targets: Tensor,
}

impl Setup {
    /// The model of `cfg` and its batch.
    ///
    /// ```
    /// use remat_reference::model::{Setup, SMALL};
    /// assert_eq!(Setup::new(SMALL).model.blocks.len(), SMALL.l as usize);
    /// ```
    pub fn new(cfg: Config) -> Setup {
        Setup::on(cfg, tch::Device::Cpu)
    }

    /// [`Setup::new`] with the model and the batch on `device`.
    ///
    /// ```
    /// use remat_reference::model::{Setup, SMALL};
    /// let device = tch::Device::cuda_if_available();
    /// assert_eq!(Setup::on(SMALL, device).tokens.device(), device);
    /// ```
    pub fn on(cfg: Config, device: tch::Device) -> Setup {
        let model = Model::on(cfg, 0, device);
        let (tokens, targets) = batch_on(cfg, 1, device);
        Setup {
            model,
            tokens,
            targets,
        }
    }

    /// The loss of the batch under `policy` (a graph not yet backpropagated),
    /// through [`Model::loss`].
    ///
    /// ```
    /// use remat_reference::model::{ModelPolicy, Setup, SMALL};
    /// let setup = Setup::new(SMALL);
    /// assert!(setup.loss(ModelPolicy::None).equal(&setup.loss(ModelPolicy::Full)));
    /// ```
    pub fn loss(&self, policy: ModelPolicy) -> Tensor {
        self.model.loss(&self.tokens, &self.targets, policy)
    }
}
