//! How replay is checked against the forward: what the forward remembers of
//! each save (nothing, its metadata, or its value) and the comparison when
//! replay refills it.
//!
//! Invariant: `record` runs once per forward save, in save order, and `check`
//! is called with the same index for the k-th save of a replay.
//!
//! docs/semantics.md, rule C13 (messages E9, E10).

use crate::bridge::{kind_of_code, Dims, TensorMeta};
use crate::capture::Capture;
use tch::{Device, Tensor};

/// How recomputation is checked against the forward.
///
/// The default is `Metadata`, as torch.utils.checkpoint's default check:
/// a recomputation that saves a tensor of another shape, dtype or device
/// than the forward's save (a cast that depends on `is_recomputing()`, a
/// body that reads changed global state) fails with a message naming the
/// save, instead of reaching the forward's grad functions; and one that
/// leaves its forward's path (another region, policy, argument count or
/// nested checkpoint, a mark the forward did not make there) fails where
/// it does, naming both steps (docs/semantics.md, rule R11). It costs one
/// crossing into C++ per save and a record per region and mark on each
/// run, within the noise of a training step (docs/determinism.md,
/// docs/performance.md); `None` turns both off.
///
/// ```
/// use remat_runtime::{checkpoint, Determinism};
/// assert_eq!(Determinism::default(), Determinism::Metadata);
/// let ckpt = checkpoint("block").determinism(Determinism::None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Determinism {
    /// Only the number of saved tensors is checked.
    None,
    /// Each refilled tensor must have the shape, dtype and device of the
    /// original save, and recomputation must take the forward's path (the
    /// default).
    #[default]
    Metadata,
    /// Debugging mode: also keeps the original values (memory!) and requires
    /// replay to reproduce them bit for bit.
    Bitwise,
}

/// A mode is a plain value: a `#[checkpoint]` closure may own one.
impl Capture for Determinism {
    fn capture(&self) -> Self {
        *self
    }
}

/// Shape, dtype and device of a saved tensor, taken in one crossing with
/// the shape inline (the check runs once per save on the forward and once
/// per save during recomputation).
#[derive(Clone)]
pub(crate) struct SaveMeta {
    dims: Dims,
    scalar_type: i32,
    device: Device,
}

impl SaveMeta {
    fn of(t: &Tensor) -> Result<Self, String> {
        let meta = TensorMeta::of(t).map_err(|e| e.to_string())?;
        Ok(SaveMeta {
            dims: meta.dims.clone(),
            scalar_type: meta.scalar_type,
            device: meta.device,
        })
    }

    fn kind(&self) -> String {
        match kind_of_code(self.scalar_type) {
            Some(kind) => format!("{kind:?}"),
            None => format!("ScalarType({})", self.scalar_type),
        }
    }
}

impl PartialEq for SaveMeta {
    fn eq(&self, other: &Self) -> bool {
        self.scalar_type == other.scalar_type
            && self.device == other.device
            && self.dims.sizes() == other.dims.sizes()
    }
}

impl std::fmt::Debug for SaveMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SaveMeta {{ sizes: {:?}, kind: {}, device: {:?} }}",
            self.dims.sizes(),
            self.kind(),
            self.device
        )
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
            // Metadata that cannot be read (libtorch threw) is not checked:
            // recomputation would fail reading it the same way.
            Determinism::Metadata => match SaveMeta::of(t) {
                Ok(meta) => ForwardSave::Meta(meta),
                Err(_) => ForwardSave::Nothing,
            },
            Determinism::Bitwise => match SaveMeta::of(t) {
                Ok(meta) => ForwardSave::Value(meta, t.copy()),
                Err(_) => ForwardSave::Nothing,
            },
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
        let now = SaveMeta::of(t)?;
        if &now != meta {
            // The dtype first when it is what differs: under autocast that is
            // the usual case, and the rest of the metadata then says nothing.
            let dtype = if now.scalar_type != meta.scalar_type {
                format!(
                    " (dtype differs: {} on the forward, {} now)",
                    meta.kind(),
                    now.kind()
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
                    meta.dims.sizes()
                ));
            }
        }
        Ok(())
    }
}
