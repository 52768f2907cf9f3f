//! A region output's parts as the runtime handles them on the forward:
//! inline when the output is one tensor, so that a region returning a tensor
//! allocates no `Vec` for its parts.
//!
//! Why by type and not by a trait method: the fast path is a detail of the
//! runtime's hot path, not something a user implementing [`RegionOutput`]
//! should see or be able to get wrong. `Tensor` and `Option<Tensor>` are
//! recognised by their `TypeId` (a comparison the compiler folds per
//! instance); every other output goes through the trait.
//!
//! Invariant: it reads as the slice [`RegionOutput::into_parts`] would give
//! (one item for `One`), so code over the parts does not care which it is.

use crate::error::Result;
use crate::io::{tensor_part, RegionOutput};
use std::any::Any;
use std::ops::Deref;
use tch::Tensor;

/// A region output's parts; see the module docs.
pub(crate) enum Parts {
    /// A single-tensor output's part, inline.
    One(Option<Tensor>),
    /// Any other output's parts and layout, as `into_parts` gave them.
    Many(Vec<Option<Tensor>>, Vec<usize>),
}

impl Parts {
    /// The lengths of the output's `Vec`s (`RegionOutput::into_parts`).
    pub(crate) fn layout(&self) -> &[usize] {
        match self {
            Parts::One(_) => &[],
            Parts::Many(_, layout) => layout,
        }
    }
}

impl Deref for Parts {
    type Target = [Option<Tensor>];
    fn deref(&self) -> &[Option<Tensor>] {
        match self {
            Parts::One(p) => std::slice::from_ref(p),
            Parts::Many(v, _) => v,
        }
    }
}

/// `out`'s parts, inline for `Tensor` and `Option<Tensor>`.
pub(crate) fn into_parts<O: RegionOutput>(out: O) -> Parts {
    let mut out = Some(out);
    let any: &mut dyn Any = &mut out;
    if let Some(t) = any.downcast_mut::<Option<Tensor>>() {
        return Parts::One(t.take());
    }
    if let Some(t) = any.downcast_mut::<Option<Option<Tensor>>>() {
        return Parts::One(t.take().flatten());
    }
    let mut layout = Vec::new();
    match out {
        Some(out) => Parts::Many(out.into_parts(&mut layout), layout),
        None => Parts::Many(Vec::new(), layout),
    }
}

/// The output back from what [`into_parts`] gave.
pub(crate) fn from_parts<O: RegionOutput>(parts: Parts) -> Result<O> {
    let part = match parts {
        Parts::One(part) => part,
        Parts::Many(v, layout) => return O::from_parts(v, &layout),
    };
    let mut out: Option<O> = None;
    let any: &mut dyn Any = &mut out;
    if let Some(slot) = any.downcast_mut::<Option<Tensor>>() {
        *slot = Some(tensor_part(part)?);
    } else if let Some(slot) = any.downcast_mut::<Option<Option<Tensor>>>() {
        *slot = Some(part);
    } else {
        return O::from_parts(vec![part], &[]);
    }
    out.map_or_else(|| O::from_parts(Vec::new(), &[]), Ok)
}
