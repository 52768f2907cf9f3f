//! Reads of a save output before `needs`, worded: the operators model code
//! writes first (`x + &attn`, `attn * 0.5`, `-attn`, `h += &attn`) are
//! implemented for `Saved` only under a bound no type meets,
//! [`ReadableAfterNeeds`], whose message names the save output and says to
//! mark it, instead of rustc's "`Scalar: From<Saved<Tensor>>` is not
//! satisfied" (docs/dsl.md, "Every compile error, and its fix").
//!
//! Invariant: `ReadableAfterNeeds` has no impl, so no code here can run:
//! every impl's bound fails to type-check where it would be used.

use crate::bridge::Saved;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};
use tch::{Scalar, Tensor};

/// Met by no type: what reading a save output before `needs` asks of it,
/// so that the error says so. Not to be implemented.
///
/// ```compile_fail
/// use remat_runtime::Saved;
/// use tch::Tensor;
/// fn bare_read(x: &Tensor, attn: Saved<Tensor>) -> Tensor {
///     x + attn // error: `Saved<Tensor>` is read before `needs` marked it
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is a save output, read before `needs` marked it",
    label = "read here, unmarked",
    note = "a save output (the output of a `save`, `auto` or `region [..]` region) is a placeholder during recomputation unless the runtime keeps it: mark it with `needs` before bare code reads it (`needs attn;` in `remat!`, or `remat::needs(&attn)` where it is read)",
    note = "code that reads it on the forward only (logging, metrics) takes `attn.on_forward()`, which is `None` during recomputation"
)]
pub trait ReadableAfterNeeds {}

// `x + attn`: tch adds any `S: Into<Scalar>` to a tensor.
impl<T> From<Saved<T>> for Scalar
where
    Saved<T>: ReadableAfterNeeds,
{
    fn from(_: Saved<T>) -> Scalar {
        unreachable!("ReadableAfterNeeds has no impl")
    }
}

impl<T> From<&Saved<T>> for Scalar
where
    Saved<T>: ReadableAfterNeeds,
{
    fn from(_: &Saved<T>) -> Scalar {
        unreachable!("ReadableAfterNeeds has no impl")
    }
}

/// `attn + x`, `&attn * 2.0`, ... and `2.0 * attn`.
macro_rules! operators {
    ($($trait:ident $method:ident),*) => {$(
        impl<T, R> $trait<R> for Saved<T>
        where
            Saved<T>: ReadableAfterNeeds,
        {
            type Output = Tensor;
            fn $method(self, _: R) -> Tensor {
                unreachable!("ReadableAfterNeeds has no impl")
            }
        }

        impl<T, R> $trait<R> for &Saved<T>
        where
            Saved<T>: ReadableAfterNeeds,
        {
            type Output = Tensor;
            fn $method(self, _: R) -> Tensor {
                unreachable!("ReadableAfterNeeds has no impl")
            }
        }

        scalars!($trait $method f64 i64);
    )*};
}

macro_rules! scalars {
    ($trait:ident $method:ident $($scalar:ty)*) => {$(
        impl<T> $trait<Saved<T>> for $scalar
        where
            Saved<T>: ReadableAfterNeeds,
        {
            type Output = Tensor;
            fn $method(self, _: Saved<T>) -> Tensor {
                unreachable!("ReadableAfterNeeds has no impl")
            }
        }

        impl<T> $trait<&Saved<T>> for $scalar
        where
            Saved<T>: ReadableAfterNeeds,
        {
            type Output = Tensor;
            fn $method(self, _: &Saved<T>) -> Tensor {
                unreachable!("ReadableAfterNeeds has no impl")
            }
        }
    )*};
}

operators!(Add add, Sub sub, Mul mul, Div div);

impl<T> Neg for Saved<T>
where
    Saved<T>: ReadableAfterNeeds,
{
    type Output = Tensor;
    fn neg(self) -> Tensor {
        unreachable!("ReadableAfterNeeds has no impl")
    }
}

impl<T> Neg for &Saved<T>
where
    Saved<T>: ReadableAfterNeeds,
{
    type Output = Tensor;
    fn neg(self) -> Tensor {
        unreachable!("ReadableAfterNeeds has no impl")
    }
}

/// `h += &attn`.
macro_rules! assign {
    ($($trait:ident $method:ident),*) => {$(
        impl<T> $trait<Saved<T>> for Tensor
        where
            Saved<T>: ReadableAfterNeeds,
        {
            fn $method(&mut self, _: Saved<T>) {
                unreachable!("ReadableAfterNeeds has no impl")
            }
        }

        impl<T> $trait<&Saved<T>> for Tensor
        where
            Saved<T>: ReadableAfterNeeds,
        {
            fn $method(&mut self, _: &Saved<T>) {
                unreachable!("ReadableAfterNeeds has no impl")
            }
        }
    )*};
}

assign!(AddAssign add_assign, SubAssign sub_assign, MulAssign mul_assign, DivAssign div_assign);
