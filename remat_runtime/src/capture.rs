//! What a `#[checkpoint]` function's closure may own.

use std::sync::Arc;
use tch::Tensor;

/// A value a checkpoint closure can own: replay runs inside backward, after
/// the function returned, so the closure keeps its own copy of everything it
/// uses, and `Send`, since replay may run on an autograd worker thread (so
/// an `Rc` is not `Capture`; an `Arc<T>` is when `T: Send + Sync`). Capturing
/// is cheap: tensors are shallow clones (the same tensor), shared pointers are
/// cloned.
///
/// `#[derive(Capture)]` implements it for structs whose fields implement it.
///
/// You meet it when a `#[checkpoint]` function's `self` or non-tensor
/// parameters, or a module a closure calls (`let m = self.mlp.capture();`),
/// must travel into the checkpoint's closure. The tensors a checkpoint takes
/// explicitly are [`CheckpointInputs`](crate::CheckpointInputs) instead, and
/// a region's arguments [`RegionInput`](crate::RegionInput).
///
/// ```
/// use remat_runtime::Capture;
/// let w = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let (w2, n) = (w.capture(), 3usize.capture());
/// assert_eq!(remat_runtime::storage::storage_key(&w), remat_runtime::storage::storage_key(&w2));
/// ```
///
/// Without the derive, implement it by capturing each field:
///
/// ```
/// use remat_runtime::{checkpoint, storage::storage_key, Capture};
/// use tch::{kind::FLOAT_CPU, Tensor};
///
/// struct Scale {
///     weight: Tensor,
///     factor: f64,
/// }
///
/// impl Capture for Scale {
///     fn capture(&self) -> Self {
///         Scale {
///             weight: self.weight.capture(),
///             factor: self.factor.capture(),
///         }
///     }
/// }
///
/// let scale = Scale { weight: Tensor::ones([3], FLOAT_CPU), factor: 2.0 };
/// let owned = scale.capture(); // the same weight tensor, not a copy
/// assert_eq!(storage_key(&owned.weight), storage_key(&scale.weight));
///
/// let x = Tensor::ones([3], FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("scale").call(&x, move |x| x * &owned.weight * owned.factor);
/// assert_eq!(Vec::<f32>::try_from(y).unwrap(), [2.0, 2.0, 2.0]);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be captured by a checkpoint",
    label = "replay runs after the function returns, so the checkpoint must own this value",
    note = "implement `remat::Capture` for it (`#[derive(Capture)]` on a struct of capturable fields), \
            use the `remat::nn` module of the same name (tch's own modules cannot be rebuilt), \
            wrap it in `remat::Shared::new(..)` (not an `Arc`: tch types are not `Sync`), \
            or pass it as a tensor parameter",
    note = "a captured value must be `Send` (replay may run on an autograd worker thread): for an `Rc`, use an `Arc`",
    note = "a save output (`Saved<..>`) is never captured: it belongs to its checkpoint run; mark it with `remat::needs` and take the tensor as a parameter"
)]
pub trait Capture: Sized + Send + 'static {
    /// An owned handle to the same value.
    fn capture(&self) -> Self;
}

impl Capture for Tensor {
    fn capture(&self) -> Self {
        self.shallow_clone()
    }
}

macro_rules! clone_capture {
    ($($t:ty),*) => {$(
        impl Capture for $t {
            fn capture(&self) -> Self {
                self.clone()
            }
        }
    )*};
}
clone_capture!(
    bool,
    char,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    f32,
    f64,
    (),
    String,
    &'static str,
    tch::Device,
    tch::Kind,
    crate::policy::Policy
);

impl<T: Capture> Capture for Option<T> {
    fn capture(&self) -> Self {
        self.as_ref().map(T::capture)
    }
}

impl<T: Capture> Capture for Vec<T> {
    fn capture(&self) -> Self {
        self.iter().map(T::capture).collect()
    }
}

impl<T: Capture, const N: usize> Capture for [T; N] {
    fn capture(&self) -> Self {
        std::array::from_fn(|i| self[i].capture())
    }
}

// `Send + Sync`: an `Arc` is `Send` only then (an `Arc<Tensor>` is not).
impl<T: ?Sized + Send + Sync + 'static> Capture for Arc<T> {
    fn capture(&self) -> Self {
        Arc::clone(self)
    }
}

macro_rules! tuple_capture {
    ($($name:ident $i:tt)+) => {
        impl<$($name: Capture),+> Capture for ($($name,)+) {
            fn capture(&self) -> Self {
                ($(self.$i.capture(),)+)
            }
        }
    };
}
tuple_capture!(A 0);
tuple_capture!(A 0 B 1);
tuple_capture!(A 0 B 1 C 2);
tuple_capture!(A 0 B 1 C 2 D 3);
tuple_capture!(A 0 B 1 C 2 D 3 E 4);
tuple_capture!(A 0 B 1 C 2 D 3 E 4 F 5);

// tch's `LayerNorm` and `Embedding` keep private fields, so they cannot be
// rebuilt around shallow clones here: capture their tensors instead.
impl Capture for tch::nn::Linear {
    fn capture(&self) -> Self {
        tch::nn::Linear {
            ws: self.ws.shallow_clone(),
            bs: self.bs.as_ref().map(Tensor::shallow_clone),
        }
    }
}
