//! `Shared<T>`: the escape hatch for capturing what has no `Capture` (a tch
//! module remat does not mirror, a closure, any other state).
//!
//! Invariant: every capture is a handle to the same value (an `Arc` clone);
//! access goes through one mutex, so the value needs only be `Send` (tch
//! types are `Send` but not `Sync`).

use crate::capture::Capture;
use crate::sync::lock;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use tch::nn::{Module, ModuleT};
use tch::Tensor;

/// A value shared by the model and the checkpoints that capture it: an
/// `Arc<Mutex<T>>` with [`Capture`], and [`ModuleT`] (and an inherent
/// `forward`) when `T` is a module. Use it for anything a checkpoint closure must own but cannot clone:
/// a tch module without a `remat::nn` counterpart (an LSTM, a transposed
/// convolution), a boxed closure, a counter. (`Arc<T>` alone does not work
/// for tch types: `Tensor` is `Send` but not `Sync`, so `Arc<Tensor>` is not
/// `Send`, and a checkpoint closure must be.)
///
/// ```
/// use remat_runtime::{checkpoint, Shared};
/// use tch::nn::{self, Module};
///
/// let vs = nn::VarStore::new(tch::Device::Cpu);
/// let proj = Shared::new(nn::conv_transpose1d(vs.root() / "up", 2, 2, 3, Default::default()));
/// let x = tch::Tensor::ones([1, 2, 5], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let owned = proj.clone(); // the same module
/// let y = checkpoint("up").call(&x, move |x| owned.forward(&x).relu());
/// y.sum(tch::Kind::Float).backward();
/// assert_eq!(x.grad().size(), [1, 2, 5]);
/// ```
pub struct Shared<T>(Arc<Mutex<T>>);

impl<T> Shared<T> {
    /// Wraps `value`.
    ///
    /// ```
    /// let counter = remat_runtime::Shared::new(0usize);
    /// *counter.lock() += 1;
    /// assert_eq!(*counter.lock(), 1);
    /// ```
    pub fn new(value: T) -> Self {
        Shared(Arc::new(Mutex::new(value)))
    }

    /// Locks the value (a panic of another user does not poison it).
    ///
    /// ```
    /// let names = remat_runtime::Shared::new(vec!["a"]);
    /// names.lock().push("b");
    /// assert_eq!(names.lock().len(), 2);
    /// ```
    pub fn lock(&self) -> MutexGuard<'_, T> {
        lock(&self.0)
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T: Send + 'static> Capture for Shared<T> {
    fn capture(&self) -> Self {
        self.clone()
    }
}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Shared").field(&*self.lock()).finish()
    }
}

impl<T: Module> Shared<T> {
    /// The module's `forward` (an inherent method: `Shared` implements
    /// [`ModuleT`], which covers modules and train-aware modules alike).
    ///
    /// ```
    /// use remat_runtime::Shared;
    /// let relu = Shared::new(tch::nn::func(|xs| xs.relu()));
    /// let x = tch::Tensor::from_slice(&[-1.0f32, 2.0]);
    /// assert!(relu.forward(&x).equal(&x.relu()));
    /// ```
    pub fn forward(&self, xs: &Tensor) -> Tensor {
        self.lock().forward(xs)
    }
}

impl<T: ModuleT> ModuleT for Shared<T> {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.lock().forward_t(xs, train)
    }
}
