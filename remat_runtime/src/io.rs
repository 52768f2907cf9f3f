//! What regions and checkpoints take and return.
//!
//! Inputs are what the runtime inspects (to find `Save` outputs and inputs it
//! can rebuild); outputs are what it records on the forward and serves on
//! replay. Both are flat: a tensor, or a tuple or `Vec` of them.
//! docs/semantics.md, rules C1 (checkpoint inputs), C10 (checkpoint
//! outputs), R7 (region outputs) and R8 (region inputs).

use crate::bridge::Saved;
use crate::error::{Error, Result};
use tch::Tensor;

/// A value passed through a region untouched and uninspected.
///
/// ```
/// use remat_runtime::{region, Opaque, Policy};
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let y = region("scale", Policy::Recompute).call((&x, Opaque(3.0)), |(x, s)| x * s.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Opaque<T>(pub T);

/// What a region takes: one argument, or a tuple of up to 12 of them.
/// Tensors (and references, `Option`s, slices and `Vec`s of them) are
/// visited; numbers, strings and [`Opaque`] values pass uninspected.
///
/// You meet it when a region's argument is a type of your own: implement it
/// so that the region sees the tensors inside (a `recompute` region asks
/// their producers to keep them, docs/semantics.md). The inputs of a whole
/// checkpoint are [`CheckpointInputs`] instead, and what its closure owns is
/// [`Capture`](crate::Capture).
///
/// ```
/// use remat_runtime::{region, Policy, RegionInput};
/// use tch::{kind::FLOAT_CPU, Tensor};
///
/// struct Pair {
///     a: Tensor,
///     b: Tensor,
/// }
///
/// impl RegionInput for Pair {
///     fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
///         f(&self.a);
///         f(&self.b);
///     }
/// }
///
/// let pair = Pair { a: Tensor::ones([2], FLOAT_CPU), b: Tensor::ones([2], FLOAT_CPU) };
/// let mut seen = 0;
/// pair.visit(&mut |_| seen += 1);
/// assert_eq!(seen, 2);
/// let sum = region("add", Policy::Recompute).call(&pair, |p| &p.a + &p.b);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a region's input",
    label = "not a tensor, a number, a string, or a collection of them",
    note = "a save output (`Saved<..>`) inside another value (a tuple, a struct) is not opened: pass it as an argument of its own (in `remat!`, one argument of the call; with `Region::call`, one `remat::io::Arg` of the tuple of arguments), or mark it with `needs` first",
    note = "wrap anything else in `remat::Opaque(..)`, or implement `remat::io::RegionInput` for a type of yours that holds tensors"
)]
pub trait RegionInput {
    /// Calls `f` on each tensor of the argument, in order.
    fn visit(&self, f: &mut dyn FnMut(&Tensor));
}

impl RegionInput for Tensor {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        f(self)
    }
}

impl<T: RegionInput + ?Sized> RegionInput for &T {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        (**self).visit(f)
    }
}

impl<T: RegionInput> RegionInput for Option<T> {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        if let Some(t) = self {
            t.visit(f)
        }
    }
}

impl<T: RegionInput> RegionInput for [T] {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        self.iter().for_each(|t| t.visit(f))
    }
}

impl<T: RegionInput> RegionInput for Vec<T> {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        self.as_slice().visit(f)
    }
}

impl<T> RegionInput for Opaque<T> {
    fn visit(&self, _: &mut dyn FnMut(&Tensor)) {}
}

macro_rules! opaque_inputs {
    ($($t:ty),*) => {$(
        impl RegionInput for $t {
            fn visit(&self, _: &mut dyn FnMut(&Tensor)) {}
        }
    )*};
}
opaque_inputs!(
    bool,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    usize,
    isize,
    f32,
    f64,
    str,
    String,
    ()
);

macro_rules! tuple_inputs {
    ($($name:ident)+) => {
        impl<$($name: RegionInput),+> RegionInput for ($($name,)+) {
            #[allow(non_snake_case)]
            fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
                let ($($name,)+) = self;
                $($name.visit(f);)+
            }
        }
    };
}
for_each_arity!(tuple_inputs);

/// The shallow handles of every tensor in `inputs`, in visit order.
pub(crate) fn input_tensors(inputs: &impl RegionInput) -> Vec<Tensor> {
    let mut out = Vec::new();
    inputs.visit(&mut |t| out.push(t.shallow_clone()));
    out
}

/// One item of a region's output: a tensor, `None` for an absent one, or a
/// `Vec` of items (the skip states of a UNet's down block). Implemented by
/// remat only, as [`RegionOutput`].
///
/// ```
/// use remat_runtime::{region, Policy};
/// use tch::Tensor;
///
/// let x = Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let (y, none): (Tensor, Option<Tensor>) = region("maybe", Policy::Save).call(&x, |x| (x * 2, None));
/// assert!(none.is_none());
/// // A tuple may hold a `Vec`: its length is kept with the tensors.
/// let (h, skips): (Tensor, Vec<Tensor>) =
///     region("down", Policy::Save).call(&x, |x| (x * 3, vec![x * 1, x * 2]));
/// assert_eq!(skips.len(), 2);
/// ```
pub trait OutputItem: OutputSeal + Sized + 'static {
    /// The item as bare code receives it from a region that may be skipped
    /// (`Saved<Tensor>`, `Option<Saved<Tensor>>`, a `Vec` of those).
    type Saved;
    /// Appends the item's tensors (`None` for an absent one) to `parts`, and
    /// the length of each `Vec` in it, outermost first, to `layout`.
    fn flatten_into(self, parts: &mut Vec<Option<Tensor>>, layout: &mut Vec<usize>);
    /// The item back from the parts and lengths [`OutputItem::flatten_into`]
    /// gave, in order.
    fn rebuild(
        parts: &mut dyn Iterator<Item = Option<Tensor>>,
        layout: &mut dyn Iterator<Item = usize>,
    ) -> Result<Self>;
    /// The item wrapped, as [`OutputItem::Saved`].
    fn into_saved(self) -> Self::Saved;
}

/// The seal of [`RegionOutput`] and [`OutputItem`]: their `Saved` form is
/// what keeps bare code from reading a skipped region's output
/// (docs/dsl.md, rule Y1), so only remat and `#[derive(RegionOutput)]`,
/// which builds that form field by field, implement them. Not an API: the
/// derive's expansion names it (`remat::__private`).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a region output",
    label = "not a tensor, an `Option<Tensor>`, a tuple or `Vec` of outputs, or a type that derives `RegionOutput`",
    note = "a struct or enum of yours whose fields are tensors, `Option<Tensor>`s, `Vec`s, tuples or other such types becomes a region and checkpoint output with `#[derive(remat::io::RegionOutput)]`"
)]
pub trait OutputSeal {}
impl OutputSeal for Tensor {}
impl OutputSeal for Option<Tensor> {}
impl<T: OutputItem> OutputSeal for Vec<T> {}
macro_rules! tuple_seals {
    ($($name:ident)+) => {
        impl<$($name: OutputItem),+> OutputSeal for ($($name,)+) {}
    };
}
for_each_output_arity!(tuple_seals);

pub(crate) fn missing() -> Error {
    Error::Internal("an output has fewer parts than its shape needs".into())
}

impl OutputItem for Tensor {
    type Saved = Saved<Tensor>;
    fn into_saved(self) -> Saved<Tensor> {
        Saved::new(self)
    }
    fn flatten_into(self, parts: &mut Vec<Option<Tensor>>, _: &mut Vec<usize>) {
        parts.push(Some(self))
    }
    fn rebuild(
        parts: &mut dyn Iterator<Item = Option<Tensor>>,
        _: &mut dyn Iterator<Item = usize>,
    ) -> Result<Self> {
        tensor_part(parts.next().ok_or_else(missing)?)
    }
}

/// A tensor output's part: present.
pub(crate) fn tensor_part(part: Option<Tensor>) -> Result<Tensor> {
    part.ok_or_else(|| Error::Internal("a tensor output came back as None".into()))
}

impl OutputItem for Option<Tensor> {
    type Saved = Option<Saved<Tensor>>;
    fn into_saved(self) -> Option<Saved<Tensor>> {
        self.map(Saved::new)
    }
    fn flatten_into(self, parts: &mut Vec<Option<Tensor>>, _: &mut Vec<usize>) {
        parts.push(self)
    }
    fn rebuild(
        parts: &mut dyn Iterator<Item = Option<Tensor>>,
        _: &mut dyn Iterator<Item = usize>,
    ) -> Result<Self> {
        parts.next().ok_or_else(missing)
    }
}

impl<T: OutputItem> OutputItem for Vec<T> {
    type Saved = Vec<T::Saved>;
    fn into_saved(self) -> Vec<T::Saved> {
        self.into_iter().map(OutputItem::into_saved).collect()
    }
    fn flatten_into(self, parts: &mut Vec<Option<Tensor>>, layout: &mut Vec<usize>) {
        layout.push(self.len());
        for item in self {
            item.flatten_into(parts, layout);
        }
    }
    fn rebuild(
        parts: &mut dyn Iterator<Item = Option<Tensor>>,
        layout: &mut dyn Iterator<Item = usize>,
    ) -> Result<Self> {
        let n = layout.next().ok_or_else(missing)?;
        (0..n).map(|_| T::rebuild(parts, layout)).collect()
    }
}

/// A tuple of items is an item: outputs nest to any depth
/// (`((Tensor, Tensor), Vec<Tensor>)`, a derived type's tuple field).
macro_rules! tuple_items {
    ($($name:ident)+) => {
        impl<$($name: OutputItem),+> OutputItem for ($($name,)+) {
            type Saved = ($($name::Saved,)+);
            #[allow(non_snake_case)]
            fn into_saved(self) -> Self::Saved {
                let ($($name,)+) = self;
                ($($name.into_saved(),)+)
            }
            #[allow(non_snake_case)]
            fn flatten_into(self, parts: &mut Vec<Option<Tensor>>, layout: &mut Vec<usize>) {
                let ($($name,)+) = self;
                $($name.flatten_into(parts, layout);)+
            }
            fn rebuild(
                parts: &mut dyn Iterator<Item = Option<Tensor>>,
                layout: &mut dyn Iterator<Item = usize>,
            ) -> Result<Self> {
                Ok(($($name::rebuild(parts, layout)?,)+))
            }
        }
    };
}
for_each_output_arity!(tuple_items);

/// What a region returns: a tensor, an `Option<Tensor>`, or a tuple or
/// `Vec` whose items are those or `Vec`s of them (any depth). The shape is
/// kept on replay: the parts go with the lengths of the `Vec`s in them.
///
/// [`RegionOutput::Saved`] is the form bare code receives from a region that
/// may be skipped on recomputation: each tensor wrapped in [`Saved`], the
/// tuple or `Vec` around them kept, so that patterns and iteration work as
/// on the plain value. Implemented by remat only (the `Saved` form is what
/// the compile-time guarantee rests on).
///
/// ```
/// use remat_runtime::RegionOutput;
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let mut layout = Vec::new();
/// let parts = (x.shallow_clone(), None::<tch::Tensor>, vec![x]).into_parts(&mut layout);
/// assert_eq!((parts.len(), layout), (3, vec![1]));
/// ```
pub trait RegionOutput: OutputSeal + Sized + 'static {
    /// The output as bare code receives it from a region that may be skipped.
    type Saved;
    /// The output wrapped, as [`RegionOutput::Saved`].
    fn into_saved(self) -> Self::Saved;
    /// The output's tensors, in order, with the length of each `Vec` in it
    /// appended to `layout`.
    fn into_parts(self, layout: &mut Vec<usize>) -> Vec<Option<Tensor>>;
    /// The output rebuilt from the parts and lengths
    /// [`RegionOutput::into_parts`] gave.
    fn from_parts(parts: Vec<Option<Tensor>>, layout: &[usize]) -> Result<Self>;
}

/// Every `OutputItem` but a bare tensor is an output of its own too: one
/// path for both.
pub(crate) fn from_item_parts<T: OutputItem>(
    parts: Vec<Option<Tensor>>,
    layout: &[usize],
) -> Result<T> {
    let n = parts.len();
    let mut parts = parts.into_iter();
    let item = T::rebuild(&mut parts, &mut layout.iter().copied())?;
    if parts.next().is_some() {
        return Err(Error::Internal(format!(
            "an output has more parts ({n}) than its shape needs"
        )));
    }
    Ok(item)
}

impl RegionOutput for Tensor {
    type Saved = Saved<Tensor>;
    fn into_saved(self) -> Saved<Tensor> {
        Saved::new(self)
    }
    fn into_parts(self, _: &mut Vec<usize>) -> Vec<Option<Tensor>> {
        vec![Some(self)]
    }
    fn from_parts(parts: Vec<Option<Tensor>>, layout: &[usize]) -> Result<Self> {
        from_item_parts(parts, layout)
    }
}

impl RegionOutput for Option<Tensor> {
    type Saved = Option<Saved<Tensor>>;
    fn into_saved(self) -> Option<Saved<Tensor>> {
        self.map(Saved::new)
    }
    fn into_parts(self, _: &mut Vec<usize>) -> Vec<Option<Tensor>> {
        vec![self]
    }
    fn from_parts(parts: Vec<Option<Tensor>>, layout: &[usize]) -> Result<Self> {
        from_item_parts(parts, layout)
    }
}

/// A `Vec` output is flattened as the `Vec` item it is: its length leads
/// the layout.
impl<T: OutputItem> RegionOutput for Vec<T> {
    type Saved = Vec<T::Saved>;
    fn into_saved(self) -> Vec<T::Saved> {
        self.into_iter().map(OutputItem::into_saved).collect()
    }
    fn into_parts(self, layout: &mut Vec<usize>) -> Vec<Option<Tensor>> {
        let mut parts = Vec::with_capacity(self.len());
        layout.push(self.len());
        for item in self {
            item.flatten_into(&mut parts, layout);
        }
        parts
    }
    fn from_parts(parts: Vec<Option<Tensor>>, layout: &[usize]) -> Result<Self> {
        from_item_parts(parts, layout)
    }
}

/// A tuple of items is an output, as the item it is (its parts and its
/// `Saved` form are the item's).
macro_rules! tuple_outputs {
    ($($name:ident)+) => {
        impl<$($name: OutputItem),+> RegionOutput for ($($name,)+) {
            type Saved = ($($name::Saved,)+);
            fn into_saved(self) -> Self::Saved {
                OutputItem::into_saved(self)
            }
            fn into_parts(self, layout: &mut Vec<usize>) -> Vec<Option<Tensor>> {
                let mut parts = Vec::with_capacity([$(stringify!($name)),+].len());
                self.flatten_into(&mut parts, layout);
                parts
            }
            fn from_parts(parts: Vec<Option<Tensor>>, layout: &[usize]) -> Result<Self> {
                from_item_parts(parts, layout)
            }
        }
    };
}
for_each_output_arity!(tuple_outputs);

/// The tensor inputs of a checkpoint. They are saved through autograd on
/// entry and read back on recomputation, where the closure receives them
/// owned.
///
/// You meet it as the first argument of [`Checkpoint::call`](crate::Checkpoint::call);
/// everything else the closure uses it must own ([`Capture`](crate::Capture)).
///
/// Implemented for `&Tensor` (received as `Tensor`), `Option<&Tensor>`
/// (`Option<Tensor>`), `&[Tensor]` and `&Vec<Tensor>` (`Vec<Tensor>`), and
/// tuples of those.
///
/// ```
/// use remat_runtime::CheckpointInputs;
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let mut flat = Vec::new();
/// (&x, None::<&tch::Tensor>).flatten(&mut flat);
/// assert_eq!(flat.len(), 2);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a checkpoint's input",
    label = "not a tensor, an `Option` of one, a slice or `Vec` of them, or a tuple of those",
    note = "a save output (`Saved<..>`) enters another checkpoint only marked: `remat::needs(&x)` (it is read there, on every replay)"
)]
pub trait CheckpointInputs {
    /// What the closure receives.
    type Owned: 'static;
    /// Appends the tensors (None for an absent one), in order.
    fn flatten(&self, out: &mut Vec<Option<Tensor>>);
    /// Appends how many flat items each part took (for slices).
    fn lens(&self, out: &mut Vec<usize>);
    /// Rebuilds the owned form from flat items and the lengths `lens` gave.
    fn rebuild(
        lens: &mut std::slice::Iter<'_, usize>,
        items: &mut dyn Iterator<Item = Option<Tensor>>,
    ) -> Self::Owned;
}

fn next_tensor(items: &mut dyn Iterator<Item = Option<Tensor>>) -> Option<Tensor> {
    items.next().flatten()
}

impl CheckpointInputs for &Tensor {
    type Owned = Tensor;
    fn flatten(&self, out: &mut Vec<Option<Tensor>>) {
        out.push(Some(self.shallow_clone()))
    }
    fn lens(&self, out: &mut Vec<usize>) {
        out.push(1)
    }
    fn rebuild(
        lens: &mut std::slice::Iter<'_, usize>,
        items: &mut dyn Iterator<Item = Option<Tensor>>,
    ) -> Tensor {
        lens.next();
        next_tensor(items).expect("a checkpoint input is missing on replay")
    }
}

// An owned tensor is passed as its reference is.
impl CheckpointInputs for Tensor {
    type Owned = Tensor;
    fn flatten(&self, out: &mut Vec<Option<Tensor>>) {
        <&Tensor>::flatten(&self, out)
    }
    fn lens(&self, out: &mut Vec<usize>) {
        <&Tensor>::lens(&self, out)
    }
    fn rebuild(
        lens: &mut std::slice::Iter<'_, usize>,
        items: &mut dyn Iterator<Item = Option<Tensor>>,
    ) -> Tensor {
        <&Tensor>::rebuild(lens, items)
    }
}

impl CheckpointInputs for Option<&Tensor> {
    type Owned = Option<Tensor>;
    fn flatten(&self, out: &mut Vec<Option<Tensor>>) {
        out.push(self.map(Tensor::shallow_clone))
    }
    fn lens(&self, out: &mut Vec<usize>) {
        out.push(1)
    }
    fn rebuild(
        lens: &mut std::slice::Iter<'_, usize>,
        items: &mut dyn Iterator<Item = Option<Tensor>>,
    ) -> Option<Tensor> {
        lens.next();
        next_tensor(items)
    }
}

impl CheckpointInputs for &[Tensor] {
    type Owned = Vec<Tensor>;
    fn flatten(&self, out: &mut Vec<Option<Tensor>>) {
        out.extend(self.iter().map(|t| Some(t.shallow_clone())))
    }
    fn lens(&self, out: &mut Vec<usize>) {
        out.push(self.len())
    }
    fn rebuild(
        lens: &mut std::slice::Iter<'_, usize>,
        items: &mut dyn Iterator<Item = Option<Tensor>>,
    ) -> Vec<Tensor> {
        let n = lens.next().copied().unwrap_or(0);
        (0..n)
            .map(|_| next_tensor(items).expect("a checkpoint input is missing on replay"))
            .collect()
    }
}

impl CheckpointInputs for &Vec<Tensor> {
    type Owned = Vec<Tensor>;
    fn flatten(&self, out: &mut Vec<Option<Tensor>>) {
        self.as_slice().flatten(out)
    }
    fn lens(&self, out: &mut Vec<usize>) {
        self.as_slice().lens(out)
    }
    fn rebuild(
        lens: &mut std::slice::Iter<'_, usize>,
        items: &mut dyn Iterator<Item = Option<Tensor>>,
    ) -> Vec<Tensor> {
        <&[Tensor]>::rebuild(lens, items)
    }
}

macro_rules! tuple_checkpoint_inputs {
    ($($name:ident)+) => {
        impl<$($name: CheckpointInputs),+> CheckpointInputs for ($($name,)+) {
            type Owned = ($($name::Owned,)+);
            #[allow(non_snake_case)]
            fn flatten(&self, out: &mut Vec<Option<Tensor>>) {
                let ($($name,)+) = self;
                $($name.flatten(out);)+
            }
            #[allow(non_snake_case)]
            fn lens(&self, out: &mut Vec<usize>) {
                let ($($name,)+) = self;
                $($name.lens(out);)+
            }
            fn rebuild(lens: &mut std::slice::Iter<'_, usize>, items: &mut dyn Iterator<Item = Option<Tensor>>) -> Self::Owned {
                ($($name::rebuild(lens, items),)+)
            }
        }
    };
}
for_each_arity!(tuple_checkpoint_inputs);

impl CheckpointInputs for () {
    type Owned = ();
    fn flatten(&self, _: &mut Vec<Option<Tensor>>) {}
    fn lens(&self, _: &mut Vec<usize>) {}
    fn rebuild(_: &mut std::slice::Iter<'_, usize>, _: &mut dyn Iterator<Item = Option<Tensor>>) {}
}
