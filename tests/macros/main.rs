//! The macros (`remat!`, `#[checkpoint]`, `#[derive(Capture)]`) against the
//! real runtime: the reference model written with them gives bitwise the
//! gradients of the runtime-API version, a read the compile-time check
//! cannot see fails at replay with the runtime's placeholder message, and
//! the trace of the macro model's forward is snapshotted.

use remat_reference::testing as common;

mod gradients;
mod options;
mod placeholder;
mod shapes;
mod trace;
