//! How bare code reads a save output: `needs`, which asks the runtime to
//! keep it (docs/dsl.md, rule Y2; docs/semantics.md, rule K4), or
//! `Saved::on_forward`, on the forward only (docs/dsl.md, rule Y6).
//!
//! Invariant: every conversion out of [`Saved`] in this file either asks
//! the runtime to keep the value first, so that recomputation serves it,
//! and never hands over a placeholder; or gives nothing while any
//! checkpoint recomputes.

use crate::bridge::{is_placeholder, peel_slice, stop_is_dry, Saved};
use crate::checkpointing::frame;
use crate::checkpointing::path::Asker;
use crate::checkpointing::region::asked;
use crate::io::RegionInput;
use std::panic::Location;
use tch::Tensor;

/// The seal of [`Needs`]: what `needs` takes is remat's and
/// `#[derive(RegionOutput)]`'s to say, since marking is what the guarantee
/// rests on. Not an API: the derive's expansion names it
/// (`remat::__private`).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a save output `needs` can mark",
    label = "not a `Saved<..>`, a collection of them, or the saved form of a type that derives `RegionOutput`",
    note = "a struct or enum of yours that a region returns gets a saved form `needs` marks with `#[derive(remat::io::RegionOutput)]`"
)]
pub trait NeedsSeal {}

/// What [`needs`] takes: a save output (`Saved<T>`), a reference to one, or
/// an `Option`, `Vec`, slice, array or tuple of them; marking a collection
/// marks every tensor in it. Implemented by remat only.
///
/// ```
/// use remat_runtime::{needs, Saved};
/// use tch::{kind::FLOAT_CPU, Tensor};
/// let parts: Vec<Saved<Tensor>> = vec![Saved::new(Tensor::ones([2], FLOAT_CPU))];
/// let parts: &[Tensor] = needs(&parts); // every element marked
/// assert_eq!(parts.len(), 1);
/// ```
#[diagnostic::on_unimplemented(
    message = "`needs` takes a save output (`Saved<..>`), and `{Self}` is not one",
    label = "not a save output, nor a collection `needs` marks",
    note = "`needs` marks what a `save`, `auto` or `region [..]` region hands to bare code; a checkpoint input, a `recompute` region's output or a value bare code computed is readable already and needs no mark: remove the `needs`",
    note = "it takes `Saved<T>`, `&Saved<T>`, `&mut Saved<T>`, an `Option`, `Vec`, slice, array or tuple of them, a `HashMap` or `BTreeMap` whose values are save outputs, or the saved form of a type that derives `remat::io::RegionOutput`; save outputs in another collection (a `VecDeque`, an `Rc`, a struct without the derive) are marked one by one where they are read: `needs(&queue[0])`"
)]
pub trait Needs: NeedsSeal {
    /// The readable value.
    type Marked;
    /// Asks for the value, then hands it over readable; [`needs`] calls it.
    #[track_caller]
    fn mark(self) -> Self::Marked;
}

/// Marks a save output: asks the running checkpoint (and any checkpoint
/// around it whose forward is running) to keep it for recomputation, and
/// gives back the readable value. `needs x;` in `remat!` is
/// `let x = needs(x);`.
///
/// On the forward it asks; during recomputation it hands back what the
/// runtime serves, which is the kept value when the forward took the same
/// path (docs/semantics.md, rules K4 and R5). A `needs` that recomputation
/// reaches and the forward did not finds a placeholder, and panics naming
/// the region and output (inside backward: the replay's error); so does a
/// `needs` of a save output kept past its checkpoint run.
///
/// ```
/// use remat_runtime::{checkpoint, needs, region, Policy};
/// use tch::{kind::FLOAT_CPU, Kind, Tensor};
///
/// let x = Tensor::ones([2], FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("block").call(&x, |x| {
///     let h = region("double", Policy::Save).call_saved(&x, |x| x * 2);
///     needs(&h).sin() // the expression form: asked for where it is read
/// });
/// y.sum(Kind::Float).backward();
/// assert!(x.grad().allclose(&((&x * 2).cos() * 2), 1e-6, 1e-6, false));
/// ```
#[track_caller]
pub fn needs<T: Needs>(value: T) -> T::Marked {
    value.mark()
}

/// Asks for `value` (rule K4), then refuses to hand bare code a placeholder.
///
/// A placeholder here means the forward did not ask at this point: a
/// `needs` only recomputation reaches, or a save output kept past the
/// checkpoint run that made it (docs/dsl.md, rule Y8). Reading it would
/// fail anyway; failing at the mark says why.
#[track_caller]
fn marked<T: RegionInput + ?Sized>(value: &T) {
    // docs/semantics.md, rule R11: during recomputation the mark is
    // checked against the forward's at this point before anything else.
    asked(value, false, &Asker::Needs, Location::caller());
    // docs/semantics.md, rule C17: after the stop, what the tail marks may
    // be dry, and nothing it reads matters any more.
    if stop_is_dry() {
        return;
    }
    value.visit(&mut |t| {
        if is_placeholder(t) {
            panic!("{}", placeholder_refused(t));
        }
    });
}

fn placeholder_refused(t: &Tensor) -> String {
    // The placeholder's own message names the checkpoint, region and output.
    let named = match t.f_sum(tch::Kind::Float) {
        // The first line: libtorch's backtrace follows.
        Err(tch::TchError::Torch(message)) => message.lines().next().unwrap_or("").to_string(),
        Err(e) => e.to_string(),
        Ok(_) => "a placeholder".to_string(),
    };
    format!(
        "`needs` was handed a placeholder: the forward did not mark this save output at \
         this point (a `needs` that only recomputation reaches, or a save output kept past \
         the checkpoint run that made it, docs/dsl.md rule Y8): {named}"
    )
}

impl<T: RegionInput> NeedsSeal for Saved<T> {}
impl<T: RegionInput> Needs for Saved<T> {
    type Marked = T;
    #[track_caller]
    fn mark(self) -> T {
        marked(&self.value.0);
        self.value.0
    }
}

impl<T: RegionInput> NeedsSeal for &Saved<T> {}
impl<'a, T: RegionInput> Needs for &'a Saved<T> {
    type Marked = &'a T;
    #[track_caller]
    fn mark(self) -> &'a T {
        marked(&self.value.0);
        &self.value.0
    }
}

impl<T: RegionInput> NeedsSeal for &mut Saved<T> {}
impl<'a, T: RegionInput> Needs for &'a mut Saved<T> {
    type Marked = &'a mut T;
    #[track_caller]
    fn mark(self) -> &'a mut T {
        marked(&self.value.0);
        &mut self.value.0
    }
}

impl<M: Needs> NeedsSeal for Option<M> {}
impl<M: Needs> Needs for Option<M> {
    type Marked = Option<M::Marked>;
    #[track_caller]
    #[allow(clippy::manual_map)]
    fn mark(self) -> Option<M::Marked> {
        // Not `map`: a closure would hide the caller's location.
        match self {
            Some(m) => Some(m.mark()),
            None => None,
        }
    }
}

impl<T: RegionInput> NeedsSeal for Vec<Saved<T>> {}
impl<T: RegionInput> Needs for Vec<Saved<T>> {
    type Marked = Vec<T>;
    #[track_caller]
    fn mark(self) -> Vec<T> {
        marked(peel_slice(&self));
        self.into_iter().map(|s| s.value.0).collect()
    }
}

impl<T: RegionInput> NeedsSeal for &Vec<Saved<T>> {}
impl<'a, T: RegionInput> Needs for &'a Vec<Saved<T>> {
    type Marked = &'a [T];
    #[track_caller]
    fn mark(self) -> &'a [T] {
        self.as_slice().mark()
    }
}

impl<T: RegionInput> NeedsSeal for &[Saved<T>] {}
impl<'a, T: RegionInput> Needs for &'a [Saved<T>] {
    type Marked = &'a [T];
    #[track_caller]
    fn mark(self) -> &'a [T] {
        let peeled = peel_slice(self);
        marked(peeled);
        peeled
    }
}

impl<T: RegionInput, const N: usize> NeedsSeal for [Saved<T>; N] {}
impl<T: RegionInput, const N: usize> Needs for [Saved<T>; N] {
    type Marked = [T; N];
    #[track_caller]
    fn mark(self) -> [T; N] {
        marked(peel_slice(&self));
        self.map(|s| s.value.0)
    }
}

impl<T: RegionInput, const N: usize> NeedsSeal for &[Saved<T>; N] {}
impl<'a, T: RegionInput, const N: usize> Needs for &'a [Saved<T>; N] {
    type Marked = &'a [T; N];
    #[track_caller]
    fn mark(self) -> &'a [T; N] {
        let peeled = peel_slice(self);
        marked(peeled);
        peeled.try_into().expect("a peeled array keeps its length")
    }
}

/// A map of save outputs, as model code keeps heads or layers by name:
/// every value marked, the keys as they were.
impl<K: Eq + std::hash::Hash, T: RegionInput, S: std::hash::BuildHasher> NeedsSeal
    for std::collections::HashMap<K, Saved<T>, S>
{
}
impl<K: Eq + std::hash::Hash, T: RegionInput, S: std::hash::BuildHasher + Default> Needs
    for std::collections::HashMap<K, Saved<T>, S>
{
    type Marked = std::collections::HashMap<K, T, S>;
    #[track_caller]
    fn mark(self) -> Self::Marked {
        let values: Vec<&T> = self.values().map(|s| &s.value.0).collect();
        marked(&values);
        self.into_iter().map(|(k, s)| (k, s.value.0)).collect()
    }
}

impl<K: Ord, T: RegionInput> NeedsSeal for std::collections::BTreeMap<K, Saved<T>> {}
impl<K: Ord, T: RegionInput> Needs for std::collections::BTreeMap<K, Saved<T>> {
    type Marked = std::collections::BTreeMap<K, T>;
    #[track_caller]
    fn mark(self) -> Self::Marked {
        let values: Vec<&T> = self.values().map(|s| &s.value.0).collect();
        marked(&values);
        self.into_iter().map(|(k, s)| (k, s.value.0)).collect()
    }
}

macro_rules! tuple_needs {
    ($($name:ident)+) => {
        impl<$($name: Needs),+> NeedsSeal for ($($name,)+) {}
        impl<$($name: Needs),+> Needs for ($($name,)+) {
            type Marked = ($($name::Marked,)+);
            #[allow(non_snake_case)]
            fn mark(self) -> Self::Marked {
                let ($($name,)+) = self;
                ($($name.mark(),)+)
            }
        }
    };
}
for_each_output_arity!(tuple_needs);

impl Saved<Tensor> {
    /// The value, detached, when this code runs on a checkpoint's forward
    /// (or outside checkpoints); `None` while any checkpoint on this thread
    /// recomputes, and for a placeholder. For code that reads a save output on the forward only
    /// (logging, metrics) without keeping it for recomputation.
    ///
    /// Detached, so that what the forward computes from it records nothing
    /// that recomputation would not record again (docs/dsl.md, rule Y6).
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, Policy};
    /// use tch::{kind::FLOAT_CPU, Kind, Tensor};
    ///
    /// let x = Tensor::ones([2], FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("block").call(&x, |x| {
    ///     let h = region("double", Policy::Save).call_saved(&x, |x| x * 2);
    ///     if let Some(h) = h.on_forward() {
    ///         assert_eq!(h.sum(Kind::Float).double_value(&[]), 4.0); // forward only
    ///     }
    ///     region("square", Policy::Recompute).call(&h, |h| h * h)
    /// });
    /// y.sum(Kind::Float).backward();
    /// ```
    pub fn on_forward(&self) -> Option<Tensor> {
        // docs/dsl.md, rule Y6: never while recomputing, at any depth; and
        // never a placeholder (one that outlived its checkpoint's
        // recomputation, kept in a thread-local: Y8).
        if frame::any_recomputing() || is_placeholder(&self.value.0) {
            return None;
        }
        Some(self.value.0.detach())
    }
}
