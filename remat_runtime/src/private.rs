//! Items the macros expand to. Not a stable API: use the public ones.
//! Calling them by hand can hand bare code a save output unmarked
//! (`returned`), which voids the guarantee of docs/dsl.md, section Y.

use crate::checkpointing::checkpoint_forward::{returned_inside, returned_plain as plain};
pub use crate::checkpointing::needs::NeedsSeal;
pub use crate::io::OutputSeal;
pub use crate::recorders::trace::enter_scope;
pub use crate::saved::arg::Arg;
use crate::saved::returned::CheckpointOutput;

/// One region argument, checked where it is written (a type that is no
/// [`RegionArg`](crate::RegionArg) is reported at it).
///
/// ```
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let a = remat_runtime::__private::arg(&x);
/// assert!(std::ptr::eq(a.0, &x));
/// ```
pub fn arg<A: crate::RegionArg>(value: A) -> Arg<A> {
    Arg(value)
}

/// A `#[checkpoint]` body's value, inside its checkpoint (docs/dsl.md, rule
/// Y4): only in return position.
///
/// ```
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let y = remat_runtime::__private::returned(x.shallow_clone());
/// assert!(y.equal(&x));
/// ```
#[track_caller]
pub fn returned<O: CheckpointOutput>(value: O) -> O::Output {
    returned_inside(value, std::panic::Location::caller())
}

/// A `#[checkpoint]` body's value where the checkpoint is switched off and
/// the body ran in its caller: asked for by every running checkpoint.
///
/// ```
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let y = remat_runtime::__private::returned_plain(x.shallow_clone());
/// assert!(y.equal(&x));
/// ```
#[track_caller]
pub fn returned_plain<O: CheckpointOutput>(value: O) -> O::Output {
    plain(value, std::panic::Location::caller())
}

/// A derived output rebuilt from all of its parts (`#[derive(RegionOutput)]`'s
/// `RegionOutput::from_parts`): more parts than its shape takes is an error.
///
/// ```
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let back: tch::Tensor = remat_runtime::__private::item_from_parts(vec![Some(x)], &[]).unwrap();
/// assert_eq!(back.size(), [2]);
/// ```
pub fn item_from_parts<T: crate::io::OutputItem>(
    parts: Vec<Option<tch::Tensor>>,
    layout: &[usize],
) -> crate::Result<T> {
    crate::io::from_item_parts(parts, layout)
}

/// The error of an output whose parts run out before its shape is rebuilt
/// (a derived enum's variant missing from the layout).
///
/// ```
/// assert!(remat_runtime::__private::missing_part().to_string().contains("fewer parts"));
/// ```
pub fn missing_part() -> crate::Error {
    crate::io::missing()
}
