//! Layers defined by closures, capturable: the closure is shared (an `Arc`
//! around a mutex), so a capture is the same closure, not a copy of it.
//!
//! Invariant: a `Func` never clones its closure; every capture calls the one
//! the model built.

use crate::capture::Capture;
use crate::shared::Shared;
use std::fmt;
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

/// tch's `Func` (a layer from a closure), capturable.
#[derive(Clone)]
pub struct Func {
    f: Shared<Plain>,
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
pub fn func<F>(f: F) -> Func
where
    F: Fn(&Tensor) -> Tensor,
    F: LayerFn,
{
    Func {
        f: Shared::new(Box::new(f)),
    }
}

impl fmt::Debug for Func {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "func")
    }
}

impl Module for Func {
    fn forward(&self, xs: &Tensor) -> Tensor {
        (self.f.lock())(xs)
    }
}

impl Capture for Func {
    fn capture(&self) -> Self {
        self.clone()
    }
}

/// tch's `FuncT` (a layer from a closure that knows train mode), capturable.
#[derive(Clone)]
pub struct FuncT {
    f: Shared<WithTrain>,
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
pub fn func_t<F>(f: F) -> FuncT
where
    F: Fn(&Tensor, bool) -> Tensor,
    F: LayerFnT,
{
    FuncT {
        f: Shared::new(Box::new(f)),
    }
}

impl fmt::Debug for FuncT {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "funcT")
    }
}

impl ModuleT for FuncT {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        (self.f.lock())(xs, train)
    }
}

impl Capture for FuncT {
    fn capture(&self) -> Self {
        self.clone()
    }
}
