//! What a unit is: its parameters, what its forward returns, and what is
//! checked of a list of units before any is sharded (docs/semantics.md,
//! rules F1, F3).

use crate::error::{Error, Result};
use std::collections::HashMap;
use tch::Tensor;

/// A group of parameters gathered and freed together: typically one
/// transformer block, plus one unit for whatever is left (embeddings, head).
///
/// ```
/// use remat_distributed::Unit;
/// let w = tch::Tensor::zeros([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let unit = Unit::new("layers.0", vec![("layers.0.w".to_string(), w)]);
/// assert_eq!(unit.name(), "layers.0");
/// ```
pub struct Unit {
    pub(super) name: String,
    pub(super) params: Vec<(String, Tensor)>,
}

impl Unit {
    /// A unit named `name` over `params` (name, tensor), in an order every
    /// rank shares.
    pub fn new(name: impl Into<String>, params: Vec<(String, Tensor)>) -> Unit {
        Unit {
            name: name.into(),
            params,
        }
    }

    /// The unit's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The tensors a unit's forward returns, whose gradients start the unit's
/// backward (rule F3).
pub trait UnitOutput {
    /// The tensors to watch.
    fn tensors(&self) -> Vec<&Tensor>;
}

impl UnitOutput for Tensor {
    fn tensors(&self) -> Vec<&Tensor> {
        vec![self]
    }
}

impl UnitOutput for (Tensor, Tensor) {
    fn tensors(&self) -> Vec<&Tensor> {
        vec![&self.0, &self.1]
    }
}

impl UnitOutput for Vec<Tensor> {
    fn tensors(&self) -> Vec<&Tensor> {
        self.iter().collect()
    }
}

/// Everything about the units that can be checked before any is sharded,
/// so that a refused list leaves the model as it was.
pub(super) fn check_units(units: &[Unit]) -> Result<()> {
    let mut names = std::collections::HashSet::new();
    let mut seen: HashMap<usize, &str> = HashMap::new();
    for unit in units {
        let name = unit.name.as_str();
        if !names.insert(name) {
            return Err(Error::Config(format!(
                "two units are named `{name}`: give each unit its own name"
            )));
        }
        let Some((first_name, first)) = unit.params.first() else {
            return Err(Error::Config(format!(
                "unit `{name}` has no parameters: leave it out, or give it some"
            )));
        };
        for (pname, p) in &unit.params {
            if !p.requires_grad() || !p.is_leaf() {
                return Err(Error::Config(format!(
                    "sharded unit `{name}`: parameter `{pname}` is not a trainable leaf: pass \
                     trainable parameters only"
                )));
            }
            if p.numel() == 0 || !p.is_contiguous() {
                return Err(Error::Config(format!(
                    "sharded unit `{name}`: parameter `{pname}` is empty or not contiguous"
                )));
            }
            if p.kind() != first.kind() || p.device() != first.device() {
                return Err(Error::Config(format!(
                    "sharded unit `{name}`: parameter `{pname}` is {:?} on {:?} but \
                     `{first_name}` is {:?} on {:?}: a unit's parameters share one dtype and \
                     device; split it into units that do",
                    p.kind(),
                    p.device(),
                    first.kind(),
                    first.device()
                )));
            }
            if let Some(other) = seen.insert(p.data_ptr() as usize, name) {
                return Err(Error::Config(format!(
                    "parameter `{pname}` of unit `{name}` is also in unit `{other}`: a \
                     parameter belongs to one unit"
                )));
            }
        }
    }
    Ok(())
}
