//! Save outputs as region arguments: the region's body receives them
//! readable, because a region that runs again on recomputation asks for
//! what it receives (docs/semantics.md, rule K2) and one that is skipped
//! never reads it then (rule K3). docs/dsl.md, rule Y3.
//!
//! Invariant: opening takes the runtime's token, and the runtime opens
//! arguments only on the way into a region's call (`Region::call`), whose
//! bookkeeping sees the opened tensors as the region's inputs; no function
//! hands an opened value to bare code.

use crate::bridge::{peel_ref_slice, peel_slice, Saved};
use crate::io::RegionInput;

/// A proof of being inside the runtime: methods that open a [`Saved`]
/// without asking take one, so code outside remat cannot call them (and
/// code `#[derive(RegionOutput)]` writes only passes on the one it is
/// given). Only remat makes one.
///
/// ```compile_fail
/// let token = remat_runtime::Token(()); // its field is private: no way to make one
/// ```
#[derive(Clone, Copy)]
pub struct Token(());

/// A token, for the runtime's own conversions. A free function, not an
/// associated one: rustc's help for `Token(())` written outside remat
/// suggests associated functions, private ones included.
pub(crate) fn token() -> Token {
    Token(())
}

/// What a region call takes as its inputs: any [`RegionInput`] (a tensor,
/// a number, a tuple of them, ...), a save output (`Saved<T>`, `&Saved<T>`,
/// or an `Option`, `Vec`, slice or array reference of them), or a tuple of
/// [`Arg`]s, each one of those. The region's body receives save outputs
/// readable.
///
/// ```
/// use remat_runtime::{RegionArg, Saved};
/// fn takes<A: RegionArg>(_: A) {}
/// let t = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// takes(&t);
/// takes(&Saved::new(t));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a region's argument",
    label = "not a tensor, a save output, a number, a string or a collection of them",
    note = "a region's arguments are its inputs, which the runtime inspects: tensors (`Tensor`, `&Tensor`, `Option<&Tensor>`, slices and `Vec`s of them), save outputs (`Saved<Tensor>` and references, slices and `Vec`s of them), numbers, `bool` and strings",
    note = "wrap anything else in `remat::Opaque(..)`, or implement `remat::io::RegionInput` for a type of yours that holds tensors",
    note = "a region's inputs are its call's arguments, and its callee is captured: for tch's `x.apply(&m)` (where `m` is the argument), write `m.forward(&x)`, so that `x` is the input and the module the callee"
)]
pub trait RegionArg {
    /// What the region's body receives.
    type Opened: RegionInput;
    /// The value the body receives (the runtime's own: its token cannot be made outside remat).
    fn open(self, token: Token) -> Self::Opened;
}

impl<T: RegionInput> RegionArg for T {
    type Opened = T;
    fn open(self, _: Token) -> T {
        self
    }
}

impl<T: RegionInput> RegionArg for Saved<T> {
    type Opened = T;
    fn open(self, _: Token) -> T {
        self.value.0
    }
}

impl<'a, T: RegionInput> RegionArg for &'a Saved<T> {
    type Opened = &'a T;
    fn open(self, _: Token) -> &'a T {
        &self.value.0
    }
}

impl<T: RegionInput> RegionArg for Option<Saved<T>> {
    type Opened = Option<T>;
    fn open(self, _: Token) -> Option<T> {
        self.map(|s| s.value.0)
    }
}

impl<'a, T: RegionInput> RegionArg for Option<&'a Saved<T>> {
    type Opened = Option<&'a T>;
    fn open(self, _: Token) -> Option<&'a T> {
        self.map(|s| &s.value.0)
    }
}

impl<T: RegionInput> RegionArg for Vec<Saved<T>> {
    type Opened = Vec<T>;
    fn open(self, _: Token) -> Vec<T> {
        self.into_iter().map(|s| s.value.0).collect()
    }
}

impl<'a, T: RegionInput> RegionArg for &'a Vec<Saved<T>> {
    type Opened = &'a [T];
    fn open(self, _: Token) -> &'a [T] {
        peel_slice(self)
    }
}

impl<'a, T: RegionInput> RegionArg for &'a [Saved<T>] {
    type Opened = &'a [T];
    fn open(self, _: Token) -> &'a [T] {
        peel_slice(self)
    }
}

impl<'a, T: RegionInput, const N: usize> RegionArg for &'a [Saved<T>; N] {
    type Opened = &'a [T];
    fn open(self, _: Token) -> &'a [T] {
        peel_slice(self)
    }
}

impl<'a, 'b, T: RegionInput> RegionArg for &'b [&'a Saved<T>] {
    type Opened = &'b [&'a T];
    fn open(self, _: Token) -> &'b [&'a T] {
        peel_ref_slice(self)
    }
}

impl<'a, 'b, T: RegionInput, const N: usize> RegionArg for &'b [&'a Saved<T>; N] {
    type Opened = &'b [&'a T];
    fn open(self, _: Token) -> &'b [&'a T] {
        peel_ref_slice(self)
    }
}

/// One argument of a region call whose arguments are a tuple holding save
/// outputs: `(Arg(&x), Arg(&attn))` (what `remat!` writes for every region).
///
/// ```
/// use remat_runtime::{checkpoint, needs, region, Arg, Policy};
/// use tch::{kind::FLOAT_CPU, Kind, Tensor};
///
/// let x = Tensor::ones([2], FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("block").call(&x, |x| {
///     let a = region("double", Policy::Save).call_saved(&x, |x| x * 2);
///     // The body gets `a` as a `&Tensor`: the region asks for it.
///     region("mul", Policy::Recompute).call((Arg(&x), Arg(&a)), |(x, a)| x * a)
/// });
/// y.sum(Kind::Float).backward();
/// ```
pub struct Arg<A>(pub A);

macro_rules! tuple_args {
    ($($name:ident)+) => {
        impl<$($name: RegionArg),+> RegionArg for ($(Arg<$name>,)+) {
            type Opened = ($($name::Opened,)+);
            #[allow(non_snake_case)]
            fn open(self, _: Token) -> Self::Opened {
                let ($(Arg($name),)+) = self;
                ($($name.open(token()),)+)
            }
        }
    };
}
for_each_arity!(tuple_args);
