//! Layers defined by closures, capturable: the closure is shared (an `Arc`
//! around a mutex), so a capture is the same closure, not a copy of it.
//!
//! `Func<'a>` and `FuncT<'a>` carry tch's lifetime parameter so that tch's
//! signatures (`fn head<'a>(..) -> nn::Func<'a>`, fields of type
//! `nn::FuncT<'static>`) compile unchanged; the closure itself is always
//! `'static` (it must outlive the code that built the model, since replay
//! runs during backward), so the parameter constrains nothing, and only
//! `Func<'static>` is `Capture` (`Capture` needs `'static`).
//!
//! Invariant: a `Func` never clones its closure; every capture calls the one
//! the model built.

use crate::capture::Capture;
use crate::shared::Shared;
use std::fmt;
use std::marker::PhantomData;
use tch::nn::{Module, ModuleT};
use tch::Tensor;

type Plain = Box<dyn Fn(&Tensor) -> Tensor + Send>;
type WithTrain = Box<dyn Fn(&Tensor, bool) -> Tensor + Send>;

/// A closure that can be a capturable layer: checkpoints replay the layer
/// during backward, after the code that built the model has returned, so it
/// must own what it uses. Implemented for every
/// `Fn(&Tensor) -> Tensor + Send + 'static`.
///
/// ```
/// use remat_runtime::nn::{self, LayerFn};
/// fn layer<F: LayerFn>(_: &F) {}
/// let w = tch::Tensor::ones([2, 2], tch::kind::FLOAT_CPU);
/// let f = move |x: &tch::Tensor| x.matmul(&w); // owns its weight
/// layer(&f);
/// ```
#[diagnostic::on_unimplemented(
    message = "this closure cannot be a capturable layer: checkpoints run it again during backward, so it must own what it uses",
    label = "borrows or holds something it cannot take along (a reference, an `Rc`, a non-`Send` value)",
    note = "move owned handles in: `let w = self.w.shallow_clone();` then `move |x| x.matmul(&w)`",
    note = "for a value without `Capture`, `remat::Shared::new(value)`; not an `Arc`: tch's `Tensor` is not `Sync`, so `Arc<Tensor>` is not `Send`"
)]
pub trait LayerFn: Fn(&Tensor) -> Tensor + Send + 'static {}

// `do_not_recommend`: report the closure, not the deepest unmet bound (see
// checkpointing/closure.rs).
#[diagnostic::do_not_recommend]
impl<F> LayerFn for F where F: Fn(&Tensor) -> Tensor + Send + 'static {}

/// [`LayerFn`] for closures that also take the train flag.
///
/// ```
/// use remat_runtime::nn::LayerFnT;
/// fn layer<F: LayerFnT>(_: &F) {}
/// layer(&|x: &tch::Tensor, train: bool| x.dropout(0.1, train));
/// ```
#[diagnostic::on_unimplemented(
    message = "this closure cannot be a capturable layer: checkpoints run it again during backward, so it must own what it uses",
    label = "borrows or holds something it cannot take along (a reference, an `Rc`, a non-`Send` value)",
    note = "move owned handles in: `let w = self.w.shallow_clone();` then `move |x, train| x.matmul(&w)`",
    note = "for a value without `Capture`, `remat::Shared::new(value)`; not an `Arc`: tch's `Tensor` is not `Sync`, so `Arc<Tensor>` is not `Send`"
)]
pub trait LayerFnT: Fn(&Tensor, bool) -> Tensor + Send + 'static {}

#[diagnostic::do_not_recommend]
impl<F> LayerFnT for F where F: Fn(&Tensor, bool) -> Tensor + Send + 'static {}

/// tch's `Func<'a>` (a layer from a closure), capturable as `Func<'static>`.
///
/// tch's signatures compile unchanged, and a field of type `Func<'static>`
/// makes a struct capturable:
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::Module;
///
/// fn gelu<'a>() -> nn::Func<'a> {
///     nn::func(|xs| xs.gelu("none"))
/// }
///
/// struct Head {
///     act: nn::Func<'static>,
/// }
///
/// let head = Head { act: gelu() };
/// let owned = head.act.capture(); // the same closure
/// let x = tch::Tensor::randn([3], tch::kind::FLOAT_CPU);
/// assert!(owned.forward(&x).equal(&x.gelu("none")));
/// ```
#[derive(Clone)]
pub struct Func<'a> {
    f: Shared<Plain>,
    // Only tch's signature: the closure is `'static` whatever `'a` is.
    life: PhantomData<&'a ()>,
}

/// A layer that applies `f`, as `tch::nn::func`; `f` owns what it uses.
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::Module;
/// let gelu = nn::func(|xs| xs.gelu("none"));
/// let x = tch::Tensor::randn([3], tch::kind::FLOAT_CPU);
/// assert!(gelu.capture().forward(&x).equal(&x.gelu("none")));
/// ```
pub fn func<'a, F>(f: F) -> Func<'a>
where
    F: Fn(&Tensor) -> Tensor,
    F: LayerFn,
{
    Func {
        f: Shared::new(Box::new(f)),
        life: PhantomData,
    }
}

impl fmt::Debug for Func<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "func")
    }
}

impl Module for Func<'_> {
    fn forward(&self, xs: &Tensor) -> Tensor {
        (self.f.lock())(xs)
    }
}

impl Capture for Func<'static> {
    fn capture(&self) -> Self {
        self.clone()
    }
}

/// tch's `FuncT<'a>` (a layer from a closure that knows train mode),
/// capturable as `FuncT<'static>`.
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::ModuleT;
///
/// fn dropout<'a>(p: f64) -> nn::FuncT<'a> {
///     nn::func_t(move |xs, train| xs.dropout(p, train))
/// }
///
/// let drop: nn::FuncT<'static> = dropout(0.1);
/// let x = tch::Tensor::randn([3], tch::kind::FLOAT_CPU);
/// assert!(drop.capture().forward_t(&x, false).equal(&x));
/// ```
#[derive(Clone)]
pub struct FuncT<'a> {
    f: Shared<WithTrain>,
    // As in `Func`: the closure is `'static` whatever `'a` is.
    life: PhantomData<&'a ()>,
}

/// A layer that applies `f(xs, train)`, as `tch::nn::func_t`.
///
/// ```
/// use remat_runtime::{nn, Capture};
/// use tch::nn::ModuleT;
/// let drop = nn::func_t(|xs, train| xs.dropout(0.1, train));
/// let x = tch::Tensor::randn([3], tch::kind::FLOAT_CPU);
/// assert!(drop.capture().forward_t(&x, false).equal(&x));
/// ```
pub fn func_t<'a, F>(f: F) -> FuncT<'a>
where
    F: Fn(&Tensor, bool) -> Tensor,
    F: LayerFnT,
{
    FuncT {
        f: Shared::new(Box::new(f)),
        life: PhantomData,
    }
}

impl fmt::Debug for FuncT<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "funcT")
    }
}

impl ModuleT for FuncT<'_> {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        (self.f.lock())(xs, train)
    }
}

impl Capture for FuncT<'static> {
    fn capture(&self) -> Self {
        self.clone()
    }
}
