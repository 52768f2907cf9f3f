//! The layout of [`Saved`]: a transparent wrapper, and the reference casts
//! that layout allows.
//!
//! Why here: the casts are `unsafe`, and the bridge is the only module with
//! `unsafe` code. The type's behaviour (what bare code may do with a value
//! it cannot read) is in `saved/`.
//!
//! Invariant: `Saved<T>` has exactly `T`'s layout (`repr(transparent)` over
//! `T` and a zero-sized marker), so `&[Saved<T>]` and `&[T]` describe the
//! same memory, and so do `&Saved<T>` and `&T`.

use std::marker::PhantomData;

/// The output of a region that recomputation may skip (`save`, `auto`,
/// `region [policy]`, offload), as bare code receives it: its data cannot be
/// read until it is marked with [`needs`](crate::needs).
///
/// What it allows is what is safe while recomputing, when the value may be a
/// placeholder: its metadata (`size`, `kind`, `device`, ...), views of it
/// (themselves `Saved`), passing it to a region (which asks for it,
/// docs/semantics.md rule K2), returning it from the checkpoint (rule K5),
/// moving, dropping and storing it. [`needs`](crate::needs) turns it into
/// the readable value and asks the runtime to keep it (rule K4);
/// [`Saved::on_forward`] reads it where recomputation never does.
///
/// It is not `Send`: a save output belongs to the checkpoint run that made
/// it, and cannot be captured by another checkpoint's closure.
///
/// ```
/// use remat_runtime::{checkpoint, needs, region, Policy, Saved};
/// use tch::{kind::FLOAT_CPU, Kind, Tensor};
///
/// let x = Tensor::ones([2, 3], FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("block").call(&x, |x| {
///     let h: Saved<Tensor> = region("double", Policy::Save).call_saved(&x, |x| x * 2);
///     assert_eq!(h.size(), [2, 3]); // metadata: fine on recomputation too
///     let h = needs(h); // asked for: readable from here on
///     h.sin()
/// });
/// y.sum(Kind::Float).backward();
/// ```
#[repr(transparent)]
pub struct Saved<T> {
    pub(crate) value: Held<T>,
    /// Not `Send` nor `Sync`: see the type's docs.
    _not_send: PhantomData<*const ()>,
}

/// The value inside a [`Saved`]: a type of its own, so that rustc's help on
/// a mistyped read (`let Attention { .. } = attn`) does not suggest the
/// private field whose type would fit. The runtime reads through it as
/// through the value (`Deref`), and moves it out as `.0`.
#[repr(transparent)]
pub(crate) struct Held<T>(pub(crate) T);

impl<T> std::ops::Deref for Held<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Held<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> Saved<T> {
    /// Wraps `value`: from now on only `needs` (or `on_forward`) reads it.
    ///
    /// Wrapping is always safe (it takes abilities away); the runtime does it
    /// for every output of a region that may be skipped.
    ///
    /// ```
    /// use remat_runtime::Saved;
    /// let s = Saved::new(tch::Tensor::ones([2], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.numel(), 2);
    /// ```
    pub fn new(value: T) -> Self {
        Saved {
            value: Held(value),
            _not_send: PhantomData,
        }
    }
}

impl<T> Saved<T> {
    /// A reference to a value, as a reference to it wrapped: what a
    /// derived output's field view hands out (`Saved::fields`), and, like
    /// [`Saved::new`], always safe, since it takes abilities away.
    ///
    /// ```
    /// use remat_runtime::Saved;
    /// let t = tch::Tensor::ones([2, 3], tch::kind::FLOAT_CPU);
    /// assert_eq!(Saved::from_ref(&t).size(), [2, 3]);
    /// ```
    pub fn from_ref(value: &T) -> &Saved<T> {
        // SAFETY: `Saved<T>` is `repr(transparent)` over `T` (the other
        // field is a ZST), so a `&T` is a valid `&Saved<T>` to the same
        // value, for the same lifetime.
        unsafe { &*(value as *const T).cast::<Saved<T>>() }
    }
}

/// `&[T]` as `&[Saved<T>]`: every element wrapped (always safe, as
/// [`Saved::from_ref`]).
pub(crate) fn wrap_slice<T>(s: &[T]) -> &[Saved<T>] {
    // SAFETY: `Saved<T>` is `repr(transparent)` over `T`, so both slices
    // have the same layout, length and lifetime.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<Saved<T>>(), s.len()) }
}

/// `&[Saved<T>]` as `&[T]`.
pub(crate) fn peel_slice<T>(s: &[Saved<T>]) -> &[T] {
    // SAFETY: `Saved<T>` is `repr(transparent)` over `T` (the other field
    // is a ZST), so both slices have the same layout, length and lifetime.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<T>(), s.len()) }
}

/// `&[&Saved<T>]` as `&[&T]`.
pub(crate) fn peel_ref_slice<'a, 'b, T>(s: &'b [&'a Saved<T>]) -> &'b [&'a T] {
    // SAFETY: a reference to a `repr(transparent)` wrapper has the layout of
    // a reference to the wrapped type, and points to the same `T`; the
    // lifetimes are carried over unchanged.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<&'a T>(), s.len()) }
}
