//! Name scopes: prefixes for the names of the regions a closure runs, so
//! that a body calling one sub-block several times names each call's
//! regions apart (docs/semantics.md, rule R10).
//!
//! Invariant: a scope lives in the innermost checkpoint frame and closes
//! with its guard, also when unwinding; every frame starts without one, so
//! the forward and each recomputation build the same names.

use crate::checkpointing::frame;

/// Runs `f` with the names of the regions it runs, in the innermost
/// running checkpoint, prefixed by `prefix/`; scopes nest
/// (`outer/inner/name`). Errors, reports, traces and policy tables see the
/// prefixed names (a table matches `block.*/attention`). Open scopes inside
/// the checkpoint's closure, so that recomputation opens them again; a
/// scope open around a checkpoint call does not reach into its closure (its
/// regions are named within their checkpoint), and outside any checkpoint a
/// scope changes nothing.
///
/// Panics if `prefix` is empty or contains `::` (which separates a
/// checkpoint's name from its regions' in tables and messages).
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::collect_trace, name_scope, region, Policy};
/// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// // One sub-block, called twice: each call's region gets its own name.
/// let block = |x: &tch::Tensor| region("act", Policy::Recompute).call(x, |x| x.tanh());
/// let (y, trace) = collect_trace(|| {
///     checkpoint("c").call(&x, move |x| {
///         let h = name_scope("block.0", || block(&x));
///         name_scope("block.1", || block(&h))
///     })
/// });
/// assert!(trace.to_string().contains("block.0/act"));
/// assert!(trace.to_string().contains("block.1/act"));
/// y.sum(tch::Kind::Float).backward();
/// ```
pub fn name_scope<R>(prefix: impl AsRef<str>, f: impl FnOnce() -> R) -> R {
    let prefix = prefix.as_ref();
    assert!(
        !prefix.is_empty() && !prefix.contains("::"),
        "name_scope: the prefix `{prefix}` must be non-empty and contain no `::` \
         (which separates a checkpoint's name from its regions')"
    );
    let _open = frame::enter_name_scope(prefix);
    f()
}
