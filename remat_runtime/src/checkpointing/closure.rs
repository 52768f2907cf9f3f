//! The bound on a checkpoint's closure, with errors that say why it exists.
//!
//! Invariant: implemented for exactly the closures that `Checkpoint::call`
//! can keep and replay: `Fn`, `Send` and `'static` (docs/semantics.md,
//! rule C2).
//!
//! Why `do_not_recommend`: without it rustc reports the deepest unmet
//! obligation of the blanket impl (for a closure borrowing `&self.w`, "`*mut
//! C_tensor` cannot be shared between threads safely", pointing into tch),
//! and our message becomes a note. With it, the first error is ours, at the
//! closure. A closure that borrows only `Sync` data passes this check (lifetimes
//! are erased when traits are selected) and gets rustc's borrow error ("borrowed
//! data escapes"), which already points at the borrow.

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
/// use remat_runtime::{checkpoint, RecomputableClosure};
/// fn recomputable<F: RecomputableClosure<tch::Tensor, tch::Tensor>>(_: &F) {}
/// let w = tch::Tensor::ones([2, 2], tch::kind::FLOAT_CPU);
/// let owned = w.shallow_clone();
/// let f = move |x: tch::Tensor| x.matmul(&owned); // owns its weight
/// recomputable(&f);
/// ```
#[diagnostic::on_unimplemented(
    message = "this closure cannot be a checkpoint's body: it runs again during backward, after `call` returns, so it must own what it uses",
    label = "borrows or holds something it cannot take along (a reference, an `Rc`, a non-`Send` value)",
    note = "move owned handles in: `let w = self.w.shallow_clone();` then `move |x| x.matmul(&w)` \
            (a shallow clone is the same tensor, not a copy)",
    note = "or capture a whole module: `let m = self.mlp.capture();` (`remat::nn` modules and `#[derive(Capture)]` structs), \
            or write the function with `#[checkpoint]`, which captures `self` for you",
    note = "for a value without `Capture`, `remat::Shared::new(value)`; not an `Arc`: tch's `Tensor` is not `Sync`, so `Arc<Tensor>` is not `Send`",
    note = "a save output (`Saved<..>`) is not `Send`: it belongs to its checkpoint run; mark it with `remat::needs`, then move the tensor in or pass it as an input of the checkpoint",
    note = "the closure must also be `Fn({I}) -> {O}`: it takes its inputs by value"
)]
pub trait RecomputableClosure<I, O>: Fn(I) -> O + Send + 'static {}

#[diagnostic::do_not_recommend]
impl<I, O, F> RecomputableClosure<I, O> for F
where
    F: Fn(I) -> O + 'static,
    F: Send,
{
}
