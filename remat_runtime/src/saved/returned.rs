//! Save outputs returned from a checkpoint: what recomputation returns is
//! discarded, so a checkpoint hands its own save outputs back unasked
//! (docs/semantics.md, rule K5; docs/dsl.md, rule T4).
//!
//! Invariant: `into_output` opens save outputs without asking, so only the
//! runtime calls it (its token cannot be made elsewhere), and only on a
//! checkpoint's return value (`checkpointing/checkpoint.rs` asks the checkpoints
//! around it, rule K8).

use crate::bridge::Saved;
use crate::io::{OutputItem, RegionOutput};
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
    label = "not a tensor, a save output, or a tuple or `Vec` of them",
    note = "a checkpoint's closure returns a `Tensor`, an `Option<Tensor>`, a `Saved<Tensor>` (a save output of the checkpoint), or a tuple (up to 8 items) or `Vec` of those, nested to any depth"
)]
pub trait CheckpointOutput {
    /// What the caller receives.
    type Output: RegionOutput;
    /// Whether the value may hold a save output (the caller's checkpoints
    /// are asked for it then).
    #[doc(hidden)]
    const HOLDS_SAVED: bool;
    /// The output the caller receives (the runtime's own: its token cannot be made outside remat).
    fn into_output(self, token: Token) -> Self::Output;
    /// Calls `f` on each tensor, in order.
    #[doc(hidden)]
    fn visit(&self, f: &mut dyn FnMut(&Tensor));
}

/// One item of a checkpoint's tuple or `Vec` output.
#[diagnostic::on_unimplemented(
    message = "a checkpoint cannot return `{Self}` in a tuple or `Vec`",
    label = "not a tensor, a save output, or a `Vec` of them",
    note = "the items of a checkpoint's tuple or `Vec` output are `Tensor`, `Option<Tensor>`, `Saved<Tensor>`, `Option<Saved<Tensor>>`, or `Vec`s of those"
)]
pub trait CheckpointOutputItem {
    /// What the caller receives for it.
    type Item: OutputItem;
    /// Whether it may be a save output.
    #[doc(hidden)]
    const HOLDS_SAVED: bool;
    /// The item the caller receives (the runtime's own: its token cannot be made outside remat).
    fn into_item(self, token: Token) -> Self::Item;
    /// Calls `f` on its tensor, if any.
    #[doc(hidden)]
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor));
}

impl CheckpointOutputItem for Tensor {
    type Item = Tensor;
    const HOLDS_SAVED: bool = false;
    fn into_item(self, _: Token) -> Tensor {
        self
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor)) {
        f(self)
    }
}

impl CheckpointOutputItem for Option<Tensor> {
    type Item = Option<Tensor>;
    const HOLDS_SAVED: bool = false;
    fn into_item(self, _: Token) -> Option<Tensor> {
        self
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor)) {
        if let Some(t) = self {
            f(t)
        }
    }
}

impl CheckpointOutputItem for Saved<Tensor> {
    type Item = Tensor;
    const HOLDS_SAVED: bool = true;
    fn into_item(self, _: Token) -> Tensor {
        self.value
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor)) {
        f(&self.value)
    }
}

impl CheckpointOutputItem for Option<Saved<Tensor>> {
    type Item = Option<Tensor>;
    const HOLDS_SAVED: bool = true;
    fn into_item(self, _: Token) -> Option<Tensor> {
        self.map(|s| s.value)
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor)) {
        if let Some(s) = self {
            f(&s.value)
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
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        self.visit_item(f)
    }
}

/// A `Vec` of items is an item (in a tuple, or the whole output): nested
/// collections are kept with their lengths (docs/semantics.md, rule C10).
impl<T: CheckpointOutputItem> CheckpointOutputItem for Vec<T> {
    type Item = Vec<T::Item>;
    const HOLDS_SAVED: bool = T::HOLDS_SAVED;
    fn into_item(self, _: Token) -> Vec<T::Item> {
        self.into_iter()
            .map(|t| t.into_item(Token::new()))
            .collect()
    }
    fn visit_item(&self, f: &mut dyn FnMut(&Tensor)) {
        self.iter().for_each(|t| t.visit_item(f))
    }
}

macro_rules! tuple_outputs {
    ($($name:ident)+) => {
        impl<$($name: CheckpointOutputItem),+> CheckpointOutput for ($($name,)+) {
            type Output = ($($name::Item,)+);
            const HOLDS_SAVED: bool = false $(|| $name::HOLDS_SAVED)+;
            #[allow(non_snake_case)]
            fn into_output(self, _: Token) -> Self::Output {
                let ($($name,)+) = self;
                ($($name.into_item(Token::new()),)+)
            }
            #[allow(non_snake_case)]
            fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
                let ($($name,)+) = self;
                $($name.visit_item(f);)+
            }
        }
    };
}
for_each_output_arity!(tuple_outputs);
