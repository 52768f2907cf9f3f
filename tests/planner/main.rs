//! Tests of the memory-budget planner (docs/planner.md): predictions equal
//! measurements, the peak contract, the solver is exact, plans are monotone
//! in the budget and keep gradients bitwise, plan files, and errors.
//!
//! Every test here measures through the whole-model report, which sees every
//! live checkpoint of the process: they take `LOCK` so that no other test's
//! graph is alive meanwhile.

use remat_reference::testing as common;

mod apply;
mod autocast;
mod contract;
mod errors;
mod exact;
mod kinds;
mod offload;
mod peak;
mod stable;
mod tables;

use remat::planner::{self, Profile};
use remat_reference::model::ModelPolicy;
pub use remat_reference::model::Setup;
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

/// Serialises the tests of this binary (see the module comment). The test
/// before may have released the lock while its thread still exits, freeing
/// what the thread kept for itself (oneDNN's scratch memory, engine queues):
/// a short wait keeps that out of the heap this test measures.
pub fn serial() -> MutexGuard<'static, ()> {
    tch::set_num_threads(1);
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    std::thread::sleep(std::time::Duration::from_millis(50));
    guard
}

/// Every parameter's gradient, in the model's order.
pub fn grads(s: &Setup) -> Vec<tch::Tensor> {
    s.model
        .named_parameters()
        .iter()
        .map(|(_, p)| p.grad().copy())
        .collect()
}

/// Asserts every parameter's gradient equals `expected`'s, bit for bit.
pub fn assert_grads(s: &Setup, expected: &[tch::Tensor], what: &str) {
    for ((name, _), (g, e)) in s
        .model
        .named_parameters()
        .iter()
        .zip(grads(s).iter().zip(expected))
    {
        common::assert_bitwise(g, e, &format!("{name} under {what}"));
    }
}

/// What the planner tests ask of the reference model's setup.
pub trait Planned {
    fn profile(&self) -> Profile;
    /// Bytes kept at the forward→backward point under `policy` (the graph
    /// is dropped).
    fn measure(&self, policy: ModelPolicy) -> i64;
}

impl Planned for Setup {
    fn profile(&self) -> Profile {
        planner::profile_with(|| self.loss(ModelPolicy::Auto), 1).unwrap()
    }

    /// Bytes kept at the forward→backward point under `policy` (the graph
    /// is dropped).
    fn measure(&self, policy: ModelPolicy) -> i64 {
        planner::measure_kept_bytes(|| self.loss(policy)).1
    }
}
