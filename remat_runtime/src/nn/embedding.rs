//! Embeddings, capturable (tch's `Embedding` keeps its configuration
//! private).

use crate::capture::Capture;
use std::borrow::Borrow;
use tch::nn::{EmbeddingConfig, Module, Path};
use tch::Tensor;

/// tch's `Embedding`, capturable: variable `weight`.
#[derive(Debug)]
pub struct Embedding {
    /// The table, `[num_embeddings, embedding_dim]`.
    pub ws: Tensor,
    config: EmbeddingConfig,
}

/// An embedding table, as `tch::nn::embedding`.
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::Module;
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let wte = nn::embedding(vs.root() / "wte", 10, 4, Default::default());
/// let ids = tch::Tensor::from_slice(&[1i64, 7, 3]);
/// assert!(wte.capture().forward(&ids).equal(&wte.forward(&ids)));
/// assert_eq!(vs.variables()["wte.weight"].size(), [10, 4]);
/// ```
pub fn embedding<'a, T: Borrow<Path<'a>>>(
    vs: T,
    num_embeddings: i64,
    embedding_dim: i64,
    config: EmbeddingConfig,
) -> Embedding {
    let ws = tch::nn::embedding(vs, num_embeddings, embedding_dim, config).ws;
    Embedding { ws, config }
}

impl Module for Embedding {
    fn forward(&self, xs: &Tensor) -> Tensor {
        Tensor::embedding(
            &self.ws,
            xs,
            self.config.padding_idx,
            self.config.scale_grad_by_freq,
            self.config.sparse,
        )
    }
}

impl Capture for Embedding {
    fn capture(&self) -> Self {
        Embedding {
            ws: self.ws.capture(),
            config: self.config,
        }
    }
}
