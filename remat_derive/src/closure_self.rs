//! What `self` is called inside a `#[checkpoint]` body. The body becomes a
//! closure, which cannot bind `self`, so `#[checkpoint]` binds the
//! receiver's capture under this name and renames every `self` in the body
//! to it. The `remat!` blocks in that body expand afterwards and see the new
//! name, which they must still treat as `self` (a region's default name is
//! never taken from it), so both macros read it from here.

/// The name `self` has in a `#[checkpoint]` closure.
pub(crate) const CLOSURE_SELF: &str = "__remat_self";
