//! Procedural macros of remat: `remat!` blocks and `#[checkpoint]` functions.
//!
//! Use them through the `remat` crate, which re-exports them.
