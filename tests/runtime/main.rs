//! Tests of the checkpoint runtime (docs/semantics.md).

#[path = "../common/mod.rs"]
mod common;

mod ambient;
mod autocast;
mod behaviour;
mod cuda_build;
mod diagnostics;
mod freed;
mod gradients;
mod memory;
mod options;
mod rules;
mod threads;
