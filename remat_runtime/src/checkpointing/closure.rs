//! The bound on a checkpoint's closure, with errors that say why it exists.
//!
//! Invariant: implemented for exactly the closures that `Checkpoint::call`
//! can keep and replay: `Fn`, `Send` and `'static`.

/// A closure a checkpoint can replay: it runs again inside backward, after
/// `call` returned (possibly on an autograd worker thread), so it must own
/// everything it uses. Implemented for every `Fn(I) -> O + Send + 'static`.
///
/// A closure that borrows (`|x| x.matmul(&self.w)`) is not one. Fixes: move
/// shallow clones in (`let w = self.w.shallow_clone(); move |x| x.matmul(&w)`),
/// or `.capture()` a whole module (`remat::nn` modules and
/// `#[derive(Capture)]` structs), or write the function with `#[checkpoint]`,
/// which captures `self`; for a value that has no `Capture`, wrap it in
/// [`Shared`](crate::Shared) (an `Arc<T>` does not help: tch's `Tensor` is not
/// `Sync`, so `Arc<Tensor>` is not `Send`).
///
/// ```
/// use remat_runtime::{checkpoint, ReplayableClosure};
/// fn replayable<F: ReplayableClosure<tch::Tensor, tch::Tensor>>(_: &F) {}
/// let w = tch::Tensor::ones([2, 2], tch::kind::FLOAT_CPU);
/// let owned = w.shallow_clone();
/// let f = move |x: tch::Tensor| x.matmul(&owned); // owns its weight
/// replayable(&f);
/// ```
#[diagnostic::on_unimplemented(
    message = "this closure cannot be a checkpoint's body: it is replayed during backward, after `call` returns",
    label = "must be `Fn({I}) -> {O}`, own what it uses (`move`), and be `Send`",
    note = "move shallow clones in (`let w = self.w.shallow_clone(); move |x| x.matmul(&w)`), \
            capture a module with `.capture()` (`remat::nn` modules, `#[derive(Capture)]`), \
            or use `#[checkpoint]`; for anything else, `remat::Shared::new(value)`"
)]
pub trait ReplayableClosure<I, O>: Fn(I) -> O + Send + 'static {}

impl<I, O, F> ReplayableClosure<I, O> for F
where
    F: Fn(I) -> O + 'static,
    F: Send,
{
}
