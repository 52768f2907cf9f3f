//! How replay is checked against the forward: what the forward remembers of
//! each save (nothing, its metadata, or its value) and the comparison when
//! replay refills it.
//!
//! Invariant: `record` runs once per forward save, in save order, and `check`
//! is called with the same index for the k-th save of a replay.
//!
//! docs/semantics.md, rule C13 (messages E9, E10).

use tch::{Device, Kind, Tensor};

/// How replay is checked against the forward.
///
/// ```
/// use remat_runtime::{checkpoint, Determinism};
/// let ckpt = checkpoint("block").determinism(Determinism::Metadata);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Determinism {
    /// Only the number of saved tensors is checked.
    #[default]
    None,
    /// Each refilled tensor must have the shape, dtype and device of the
    /// original save.
    Metadata,
    /// Debugging mode: also keeps the original values (memory!) and requires
    /// replay to reproduce them bit for bit.
    Bitwise,
}

/// Shape, dtype and device of a saved tensor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SaveMeta {
    sizes: Vec<i64>,
    kind: Kind,
    device: Device,
}

impl SaveMeta {
    fn of(t: &Tensor) -> Self {
        SaveMeta {
            sizes: t.size(),
            kind: t.kind(),
            device: t.device(),
        }
    }
}

/// What the determinism check keeps of each forward save.
pub(crate) enum ForwardSave {
    Nothing,
    Meta(SaveMeta),
    Value(SaveMeta, Tensor),
}

impl Determinism {
    /// Remembers what this mode needs of the forward's save `t`.
    pub(crate) fn record(self, saves: &mut Vec<ForwardSave>, t: &Tensor) {
        saves.push(match self {
            Determinism::None => ForwardSave::Nothing,
            Determinism::Metadata => ForwardSave::Meta(SaveMeta::of(t)),
            Determinism::Bitwise => ForwardSave::Value(SaveMeta::of(t), t.copy()),
        });
    }

    /// Compares replay's save `index` with what the forward remembered.
    pub(crate) fn check(
        self,
        saves: &[ForwardSave],
        index: usize,
        t: &Tensor,
    ) -> Result<(), String> {
        let (meta, value) = match saves.get(index) {
            Some(ForwardSave::Meta(m)) => (m, None),
            Some(ForwardSave::Value(m, v)) => (m, Some(v)),
            _ => return Ok(()),
        };
        let now = SaveMeta::of(t);
        if &now != meta {
            // The dtype first when it is what differs: under autocast that is
            // the usual case, and the rest of the metadata then says nothing.
            let dtype = if now.kind != meta.kind {
                format!(
                    " (dtype differs: {:?} on the forward, {:?} now)",
                    meta.kind, now.kind
                )
            } else {
                String::new()
            };
            return Err(format!(
                "saved tensor {index} differs between forward and replay: forward saved \
                 {meta:?}, replay {now:?}{dtype}; the closure must compute the same thing both times"
            ));
        }
        if let Some(v) = value {
            if !v.equal(t) {
                return Err(format!(
                    "saved tensor {index} ({:?}) has other values on replay than on the \
                     forward (Determinism::Bitwise); something in the closure is not \
                     deterministic (an RNG without a state hook?)",
                    meta.sizes
                ));
            }
        }
        Ok(())
    }
}
