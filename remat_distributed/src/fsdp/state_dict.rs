//! Full state dicts of a sharded model: gathered unit by unit for saving,
//! sliced into this rank's shards for loading (docs/semantics.md, rule F2).

use super::FullyShardedDataParallel;
use crate::error::{Error, Result};
use std::collections::HashMap;
use tch::Tensor;

impl FullyShardedDataParallel {
    /// Every parameter's full value under its name, gathered unit by unit
    /// (every rank takes part and receives it; save it on rank 0). The
    /// units' own buffers are not touched.
    pub fn full_state_dict(&self) -> Result<Vec<(String, Tensor)>> {
        let mut out = Vec::new();
        for (i, u) in self.units.iter().enumerate() {
            let flat = Tensor::zeros([u.padded], (u.kind, u.device));
            self.core
                .raw
                .gather_into(i, &flat)
                .map_err(|e| self.core.failed(&format!("gathering unit `{}`", u.name), e))?;
            let mut at = 0i64;
            for (name, shape) in &u.params {
                let n: i64 = shape.iter().product();
                out.push((
                    name.clone(),
                    flat.narrow(0, at, n).view(shape.as_slice()).copy(),
                ));
                at += n;
            }
        }
        Ok(out)
    }

    /// Loads full values (as [`full_state_dict`](Self::full_state_dict)
    /// returns them, on every rank) into this rank's shards. Every
    /// parameter must be present with its shape; names no unit has are an
    /// error.
    pub fn load_full_state_dict(&self, named: &[(String, Tensor)]) -> Result<()> {
        let given: HashMap<&str, &Tensor> = named.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let known: usize = self.units.iter().map(|u| u.params.len()).sum();
        if given.len() != known {
            let ours: std::collections::HashSet<&str> = self
                .units
                .iter()
                .flat_map(|u| u.params.iter().map(|(n, _)| n.as_str()))
                .collect();
            if let Some(extra) = given.keys().find(|n| !ours.contains(*n)) {
                return Err(Error::Config(format!(
                    "load_full_state_dict: `{extra}` is no parameter of any unit"
                )));
            }
        }
        let world = self.core.world_size as i64;
        for u in &self.units {
            let mut parts = Vec::new();
            for (name, shape) in &u.params {
                let t = given.get(name.as_str()).ok_or_else(|| {
                    Error::Config(format!(
                        "load_full_state_dict: parameter `{name}` of unit `{}` is missing",
                        u.name
                    ))
                })?;
                if t.size() != *shape {
                    return Err(Error::Config(format!(
                        "load_full_state_dict: `{name}` has shape {:?}, the unit `{}` holds \
                         {shape:?}",
                        t.size(),
                        u.name
                    )));
                }
                parts.push(t.to_kind(u.kind).to_device(u.device).reshape([-1]));
            }
            let total: i64 = parts.iter().map(|p| p.numel() as i64).sum();
            parts.push(Tensor::zeros([u.padded - total], (u.kind, u.device)));
            let flat = Tensor::cat(&parts, 0);
            let len = u.padded / world;
            let shard = u.shard.shallow_clone();
            tch::no_grad(|| {
                shard
                    .shallow_clone()
                    .copy_(&flat.narrow(0, self.core.rank as i64 * len, len))
            });
        }
        Ok(())
    }
}
