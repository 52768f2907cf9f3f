//! Tests of the libtorch bridge: custom functions, saved-tensor hooks,
//! placeholders and storage identity.

mod function;
mod hooks;
mod placeholder;
mod storage;

use tch::{Kind, Tensor};

/// A float tensor from values, requiring grad.
pub fn leaf(values: &[f32]) -> Tensor {
    Tensor::from_slice(values).set_requires_grad(true)
}

pub fn values(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.to_kind(Kind::Float).flatten(0, -1)).unwrap()
}
