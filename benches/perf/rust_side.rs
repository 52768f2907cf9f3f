//! The Rust variants: a training step of the reference model, the bytes it
//! saves for backward, the per-region chain, and the memory child.

use remat::planner::measure_kept_bytes;
use remat::{checkpoint, region, Policy};
use remat_reference::measure::{peak_resident_bytes, resident_bytes};
use remat_reference::model::{Config, ModelPolicy, Setup};
use std::sync::OnceLock;
use std::time::Instant;
use tch::{Kind, Tensor};

pub fn policy_name(p: ModelPolicy) -> &'static str {
    match p {
        ModelPolicy::None => "none",
        ModelPolicy::Full => "full",
        ModelPolicy::Selective => "selective",
        ModelPolicy::SaveMlp => "save_mlp",
        ModelPolicy::Auto => "auto",
    }
}

pub fn policy_by_name(name: &str) -> Option<ModelPolicy> {
    remat_reference::model::POLICIES
        .into_iter()
        .find(|p| policy_name(*p) == name)
}

/// One forward and backward: seconds and the loss.
pub fn step(setup: &Setup, policy: ModelPolicy) -> (f64, f64) {
    setup.model.zero_grad();
    let device = setup.model.device();
    remat::diagnostics::device::synchronize(device);
    let start = Instant::now();
    let loss = setup.loss(policy);
    loss.backward();
    remat::diagnostics::device::synchronize(device);
    let secs = start.elapsed().as_secs_f64();
    (secs, f64::try_from(&loss).expect("a scalar loss"))
}

/// Bytes saved for backward when the forward is done: remat's count
/// (`planner::measure_kept_bytes`: what checkpoints keep, the inputs they
/// keep for replay, and what autograd saved outside them; not parameters),
/// the count the training example and the planner use.
pub fn saved_bytes(setup: &Setup, policy: ModelPolicy) -> i64 {
    setup.model.zero_grad();
    let (loss, bytes) = measure_kept_bytes(|| setup.loss(policy));
    loss.backward();
    bytes
}

pub const CHAIN: usize = 200;

/// Region names as a literal would give them (no formatting per call).
fn chain_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        (0..CHAIN)
            .map(|i| &*Box::leak(format!("r{i}").into_boxed_str()))
            .collect()
    })
}

/// A checkpoint around 200 `x * 1.0001` on one element, as regions
/// alternating `Save` and `Recompute` or as bare code; seconds.
pub fn chain(regions: bool, backward: bool) -> f64 {
    let device = crate::device();
    let x = Tensor::ones([1], (Kind::Float, device)).set_requires_grad(true);
    remat::diagnostics::device::synchronize(device);
    // Settles the heap, untimed: a request above glibc's small bins makes
    // it consolidate the fast bins the previous run freed, which the first
    // such request inside the timed run would pay otherwise (the bare chain
    // makes none, so the chain with regions paid for both variants'
    // garbage, about 600 instructions per region in half its runs).
    drop(std::hint::black_box(vec![0u8; 4096]));
    let (seconds, graph) = timed_chain(&x, regions, backward);
    // Freed after the clock stops, as before.
    drop(graph);
    seconds
}

/// The timed part of [`chain`], apart so that a profiler can count just it
/// (`valgrind --tool=callgrind --toggle-collect='perf::rust_side::timed_chain'`).
#[inline(never)]
fn timed_chain(x: &Tensor, regions: bool, backward: bool) -> (f64, Tensor) {
    let names = chain_names();
    let start = Instant::now();
    // Two checkpoints, as a model's two blocks would be: each starts its
    // tables at the sizes its own last forward reached.
    let name = if regions { "chain-regions" } else { "chain" };
    let y = checkpoint(name).call(x, move |x| {
        let mut h = x;
        for (i, name) in names.iter().enumerate() {
            h = if regions {
                let policy = if i % 2 == 0 {
                    Policy::Save
                } else {
                    Policy::Recompute
                };
                region(*name, policy).call(&h, |h| h * 1.0001)
            } else {
                &h * 1.0001
            };
        }
        h
    });
    if backward {
        y.sum(Kind::Float).backward();
    }
    remat::diagnostics::device::synchronize(x.device());
    (start.elapsed().as_secs_f64(), y)
}

/// `VmHWM` and `VmRSS` of this process, in bytes; -1 without /proc.
pub fn vm_status() -> (i64, i64) {
    let bytes = |b: Option<u64>| b.map_or(-1, |b| b as i64);
    (bytes(peak_resident_bytes()), bytes(resident_bytes()))
}

/// The memory child: `steps` steps of `cfg` under `policy`; prints the peak
/// resident size and how much the first forward grew the resident size.
pub fn rss_child(cfg: Config, policy: ModelPolicy, steps: usize) {
    let setup = Setup::on(cfg, crate::device());
    let mut growth = 0;
    // Minor page faults and seconds of the steps after the first (which
    // pays for first-touch of everything): per step, as the Python child
    // reports them too.
    let (mut faults, mut secs) = (0, 0.0);
    for step in 0..steps {
        setup.model.zero_grad();
        let (f0, t0) = (minor_faults().unwrap_or(0), Instant::now());
        let before = vm_status().1;
        let loss = setup.loss(policy);
        if step == 0 {
            growth = vm_status().1 - before;
        }
        loss.backward();
        if step > 0 {
            faults += minor_faults().unwrap_or(0).saturating_sub(f0);
            secs += t0.elapsed().as_secs_f64();
        }
    }
    let later = steps.saturating_sub(1).max(1) as f64;
    println!(
        "{{\"hwm\": {}, \"forward_growth\": {growth}, \"faults_per_step\": {}, \"secs_per_step\": {}}}",
        vm_status().0,
        faults as f64 / later,
        secs / later
    );
}

/// This process's minor page faults so far (/proc/self/stat, field 10);
/// `None` without /proc.
pub fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; count after its ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(7))
        .and_then(|v| v.parse().ok())
}
