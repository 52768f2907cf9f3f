//! A `VarStore`'s trainable variables in an order every rank shares: by
//! name, since a `VarStore` keeps no order (rules W4, F1).

use tch::Tensor;

/// The trainable variables of `vs`, sorted by name.
pub(crate) fn trainable_by_name(vs: &tch::nn::VarStore) -> Vec<(String, Tensor)> {
    let mut named: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
}
