//! Save outputs returned from a checkpoint: what recomputation returns is
//! discarded, so a checkpoint hands its own save outputs back unasked
//! (docs/semantics.md, rule K5; docs/dsl.md, rule Y4).
//!
//! Invariant: `into_output` opens save outputs without asking, so only the
//! runtime calls it (its token cannot be made elsewhere), and only on a
//! checkpoint's return value (`checkpointing/checkpoint.rs` asks the checkpoints
//! around it, rule K8).

use crate::bridge::Saved;
use crate::io::{OutputItem, RegionInput, RegionOutput};
use crate::saved::arg::Token;
use tch::Tensor;

/// What a checkpoint's closure may return: a tensor, an `Option`, or a
/// tuple or `Vec` of them, nested to any depth (`(Tensor, Vec<Tensor>)`:
/// docs/semantics.md, rule C10), any of which may be a save output of the
/// checkpoint (`Saved<Tensor>`), which the caller receives as a tensor.
/// Implemented by remat only.
///
/// ```
/// use remat_runtime::{checkpoint, region, Policy};
/// use tch::{kind::FLOAT_CPU, Kind, Tensor};
///
/// let x = Tensor::ones([2], FLOAT_CPU).set_requires_grad(true);
/// // The closure returns a `Saved<Tensor>`; the caller gets a `Tensor`.
/// let y: Tensor = checkpoint("block").call(&x, |x| {
///     region("double", Policy::Save).call_saved(&x, |x| x * 2)
/// });
/// y.sum(Kind::Float).backward();
/// ```
#[diagnostic::on_unimplemented(
    message = "a checkpoint cannot return `{Self}`",
    label = "not a tensor, a save output, a type that derives `RegionOutput`, or a tuple or `Vec` of them",
    note = "a checkpoint's closure returns a `Tensor`, an `Option<Tensor>`, a `Saved<Tensor>` (a save output of the checkpoint), a type of yours that derives `remat::io::RegionOutput` (or its saved form), or a tuple (up to 8 items) or `Vec` of those, nested to any depth"
)]
pub trait CheckpointOutput {
    /// What the caller receives.
    type Output: RegionOutput;
    /// Whether the value may hold a save output (the caller's checkpoints
    /// are asked for it then).
    #[doc(hidden)]
    const HOLDS_SAVED: bool;
    /// The output the caller receives (the runtime's own: its token cannot
    /// be made outside remat).
    fn into_output(self, token: Token) -> Self::Output;
    /// Calls `f` on each tensor, in order (the runtime's own, as
    /// `into_output`: a save output's tensor is not for bare code to read).
    #[doc(hidden)]
    fn visit(&self, f: &mut dyn FnMut(&Tensor), token: Token);
}

/// One item of a checkpoint's output: what a tuple, a `Vec` or a derived
/// type's field holds, and on its own the whole output.
#[diagnostic::on_unimplemented(
    message = "a checkpoint cannot return `{Self}`",
    label = "not a tensor, a save output, a type that derives `RegionOutput`, or a tuple or `Vec` of them",
    note = "a checkpoint's closure returns a `Tensor`, an `Option<Tensor>`, a `Saved<Tensor>` (a save output of the checkpoint), a type of yours that derives `remat::io::RegionOutput` (or its saved form), or a tuple (up to 8 items) or `Vec` of those, nested to any depth"
)]
pub trait CheckpointOutputItem {
    /// What the caller receives for it.
    type Item: OutputItem;
    /// Whether it may be a save output.
    #[doc(hidden)]
    const HOLDS_SAVED: bool;
    /// The item the caller receives (the runtime's own: its token cannot be
    /// made outside remat).
    fn into_item(self, token: Token) -> Self::Item;
    /// Calls `f` on its tensors, in order (the runtime's own).
    #[doc(hidden)]
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor), token: Token);
}

impl CheckpointOutputItem for Tensor {
    type Item = Tensor;
    const HOLDS_SAVED: bool = false;
    fn into_item(self, _: Token) -> Tensor {
        self
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor), _: Token) {
        f(self)
    }
}

impl CheckpointOutputItem for Option<Tensor> {
    type Item = Option<Tensor>;
    const HOLDS_SAVED: bool = false;
    fn into_item(self, _: Token) -> Option<Tensor> {
        self
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor), _: Token) {
        if let Some(t) = self {
            f(t)
        }
    }
}

/// A save output returned, a tensor's or a derived output's: the caller
/// receives the value (rule K5).
impl<T: OutputItem + RegionInput> CheckpointOutputItem for Saved<T> {
    type Item = T;
    const HOLDS_SAVED: bool = true;
    fn into_item(self, _: Token) -> T {
        self.value.0
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor), _: Token) {
        self.value.0.visit(f)
    }
}

impl CheckpointOutputItem for Option<Saved<Tensor>> {
    type Item = Option<Tensor>;
    const HOLDS_SAVED: bool = true;
    fn into_item(self, _: Token) -> Option<Tensor> {
        self.map(|s| s.value.0)
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor), _: Token) {
        if let Some(s) = self {
            f(&s.value.0)
        }
    }
}

impl<T: CheckpointOutputItem> CheckpointOutput for T
where
    T::Item: RegionOutput,
{
    type Output = T::Item;
    const HOLDS_SAVED: bool = T::HOLDS_SAVED;
    fn into_output(self, token: Token) -> T::Item {
        self.into_item(token)
    }
    fn visit(&self, f: &mut dyn FnMut(&Tensor), token: Token) {
        self.visit_item(f, token)
    }
}

/// A `Vec` of items is an item (in a tuple, or the whole output): nested
/// collections are kept with their lengths (docs/semantics.md, rule C10).
impl<T: CheckpointOutputItem> CheckpointOutputItem for Vec<T> {
    type Item = Vec<T::Item>;
    const HOLDS_SAVED: bool = T::HOLDS_SAVED;
    fn into_item(self, token: Token) -> Vec<T::Item> {
        self.into_iter().map(|t| t.into_item(token)).collect()
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor), token: Token) {
        self.iter().for_each(|t| t.visit_item(f, token))
    }
}

/// A tuple of items is an item (nested in a tuple, a `Vec` or a derived
/// type's field), and on its own the whole output.
macro_rules! tuple_items {
    ($($name:ident)+) => {
        impl<$($name: CheckpointOutputItem),+> CheckpointOutputItem for ($($name,)+) {
            type Item = ($($name::Item,)+);
            const HOLDS_SAVED: bool = false $(|| $name::HOLDS_SAVED)+;
            #[allow(non_snake_case)]
            fn into_item(self, token: Token) -> Self::Item {
                let ($($name,)+) = self;
                ($($name.into_item(token),)+)
            }
            #[allow(non_snake_case)]
            fn visit_item(&self, f: &mut dyn FnMut(&Tensor), token: Token) {
                let ($($name,)+) = self;
                $($name.visit_item(f, token);)+
            }
        }
    };
}
for_each_output_arity!(tuple_items);
