//! A region output's parts as the runtime handles them on the forward:
//! inline when there is one, so that a region returning a tensor allocates
//! no `Vec` for its parts.
//!
//! Invariant: it reads as the slice [`RegionOutput::into_parts`] would give
//! (one item for `One`), so code over the parts does not care which it is.
//!
//! [`RegionOutput::into_parts`]: crate::RegionOutput::into_parts

use std::ops::Deref;
use tch::Tensor;

/// A region output's parts; see the module docs. Not a stable API.
///
/// ```
/// use remat_runtime::__private::Parts;
/// let one = Parts::One(None);
/// assert_eq!(one.len(), 1);
/// assert_eq!(one.into_vec().len(), 1);
/// ```
pub enum Parts {
    /// A single-tensor output's part, inline.
    One(Option<Tensor>),
    /// Any other output's parts, as `into_parts` gave them.
    Many(Vec<Option<Tensor>>),
}

impl Parts {
    /// The parts as `RegionOutput::from_parts` takes them.
    pub fn into_vec(self) -> Vec<Option<Tensor>> {
        match self {
            Parts::One(p) => vec![p],
            Parts::Many(v) => v,
        }
    }
}

impl Deref for Parts {
    type Target = [Option<Tensor>];
    fn deref(&self) -> &[Option<Tensor>] {
        match self {
            Parts::One(p) => std::slice::from_ref(p),
            Parts::Many(v) => v,
        }
    }
}
