//! The checks that matter on a GPU (docs/gpu.md): each runs on
//! `cuda:0` when a CUDA device is visible and otherwise prints
//! `NAME: skipped: no CUDA device` and passes. The GPU kit runs this binary
//! (`run.sh`); with `REMAT_GPU_RESULTS=FILE` every check appends one line
//! `NAME<TAB>pass|fail|skipped<TAB>detail` to FILE, the kit's table.
//!
//! Gradients are compared bitwise with the model without checkpoints: with
//! deterministic algorithms and a fixed cuBLAS workspace, replay runs the
//! forward's kernels on the forward's inputs, so the bits must agree on
//! CUDA as on the CPU (docs/testing.md; docs/semantics.md, rule D7).

mod early_stop;
mod gradients;
mod inside;
mod memory;
mod offload;
mod rng;
mod streams;

use remat_reference::model::{Model, ModelPolicy};
use std::io::Write;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard, OnceLock};
use tch::{Device, Tensor};

/// The device the checks use, after the one-time set-up; `None` without CUDA.
fn cuda() -> Option<Device> {
    static SET_UP: OnceLock<Option<Device>> = OnceLock::new();
    *SET_UP.get_or_init(|| {
        if !tch::Cuda::is_available() {
            return None;
        }
        // cuBLAS reads this when it first creates a handle: fixed workspaces
        // make its reductions deterministic (run.sh exports it too).
        if std::env::var_os("CUBLAS_WORKSPACE_CONFIG").is_none() {
            std::env::set_var("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
        }
        remat::diagnostics::device::set_deterministic_algorithms(true).expect("the switch exists");
        Some(Device::Cuda(0))
    })
}

/// One check at a time: they share the device's allocator counters and
/// libtorch's generator.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn record(name: &str, status: &str, detail: &str) {
    let detail = detail.replace(['\n', '\t'], " ");
    println!(
        "{name}: {status}{}",
        if detail.is_empty() {
            String::new()
        } else {
            format!(": {detail}")
        }
    );
    if let Some(path) = std::env::var_os("REMAT_GPU_RESULTS") {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the results file opens");
        writeln!(file, "{name}\t{status}\t{detail}").expect("the results file takes a line");
    }
}

/// Runs `body` on the CUDA device, or records the skip. `body` returns
/// the detail of a pass (numbers for the kit's table); a panic records the
/// failure with its message and fails the test.
fn check(name: &str, body: impl FnOnce(Device) -> String) {
    let _serial = serial();
    let Some(device) = cuda() else {
        record(name, "skipped", "no CUDA device");
        return;
    };
    match catch_unwind(AssertUnwindSafe(|| body(device))) {
        Ok(detail) => record(name, "pass", &detail),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            record(name, "fail", &message);
            resume_unwind(panic)
        }
    }
}

/// Every parameter's gradient, on the CPU, in `named_parameters` order.
fn grads(model: &Model) -> Vec<(String, Tensor)> {
    model
        .named_parameters()
        .into_iter()
        .map(|(n, p)| (n, p.grad().to(Device::Cpu)))
        .collect()
}

/// Panics unless every gradient has the same bits, naming the first that
/// differs and by how much (what a tolerance would have to allow).
fn assert_same_grads(got: &[(String, Tensor)], want: &[(String, Tensor)], what: &str) {
    for ((name, g), (_, w)) in got.iter().zip(want) {
        if remat_reference::testing::bits(g) != remat_reference::testing::bits(w) {
            let diff = f64::try_from((g - w).abs().max()).unwrap_or(f64::NAN);
            panic!("{what}: the gradient of {name} differs (largest difference {diff:e})");
        }
    }
}

/// The loss and gradients of `policy` on the model's batch, `wrap` around
/// the forward (a plan's or autocast's scope).
fn run(
    model: &Model,
    tokens: &Tensor,
    targets: &Tensor,
    policy: ModelPolicy,
    wrap: &dyn Fn(&dyn Fn() -> Tensor) -> Tensor,
) -> (Vec<u32>, Vec<(String, Tensor)>) {
    model.zero_grad();
    let loss = wrap(&|| model.loss(tokens, targets, policy));
    loss.backward();
    (
        remat_reference::testing::bits(&loss.to(Device::Cpu)),
        grads(model),
    )
}
