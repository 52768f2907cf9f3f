//! The macros (`remat!`, `#[checkpoint]`, `#[derive(Capture)]`) against the
//! real runtime: the reference model written with them gives bitwise the
//! gradients of the runtime-API version, save outputs in every shape give
//! the gradients of the body without a checkpoint, a read the types let
//! through (a `needs` only replay reaches) fails at replay with the
//! runtime's placeholder message, and the trace of the macro model's
//! forward is snapshotted.

use remat_reference::testing as common;

mod detach;
mod forms;
mod gradients;
mod name_scope;
mod options;
mod outputs;
mod path;
mod placeholder;
mod shapes;
mod trace;
