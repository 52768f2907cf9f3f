//! Tests of the checkpoint runtime (docs/semantics.md).

use remat_reference::testing as common;

mod adversarial;
mod ambient;
mod autocast;
mod backward_inside;
mod behaviour;
mod cuda_build;
mod diagnostics;
mod early_stop;
mod freed;
mod gradients;
mod kept;
mod memory;
mod name_scope;
mod offload;
mod options;
mod outputs;
mod path;
mod plain;
mod recompute_start;
mod rules;
mod threads;
mod views;
mod ways;
