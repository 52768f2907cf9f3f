//! Items the macros expand to. Not a stable API: use the public ones.

pub use crate::diagnostics::trace::enter_scope;

/// A region argument, unchanged: the macros pass every argument through this
/// so that a type that is no region input fails with a clear message.
///
/// ```
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let same = remat_runtime::__private::input(&x);
/// assert!(std::ptr::eq(same, &x));
/// ```
pub fn input<T: crate::RegionInput>(value: T) -> T {
    value
}
