//! CUDA memory: the OOM observer on a forced out-of-memory error,
//! allocation sites in a memory report, the planner's predicted bytes and
//! peak against the caching allocator's count, and each policy's peak.

use crate::check;
use remat::diagnostics::device::{cuda_memory, reset_cuda_peak};
use remat::diagnostics::{attach_oom_observer, memory_report, record_allocation_sites};
use remat::planner::{self, Plan};
use remat::{checkpoint, region, Policy};
use remat_reference::model::{batch_on, Model, ModelPolicy, MEDIUM, POLICIES};
use std::process::Command;
use std::sync::{Arc, Mutex};
use tch::{Device, Kind, Tensor};

/// Set in the child process the OOM check starts: only there does
/// `oom_child` allocate too much.
const OOM_CHILD: &str = "REMAT_GPU_OOM_CHILD";

/// The child's side: a region that asks for far more than any GPU has.
#[test]
fn oom_child() {
    if std::env::var_os(OOM_CHILD).is_none() {
        return;
    }
    attach_oom_observer().unwrap();
    let x = Tensor::ones([4], (Kind::Float, Device::Cuda(0))).set_requires_grad(true);
    let _y = checkpoint("oom").call(&x, |x| {
        region("huge", Policy::Save).call(&x, |x| {
            let err = Tensor::f_empty([1i64 << 46], (Kind::Float, x.device())).unwrap_err();
            eprintln!(
                "child: allocation failed: {}",
                err.to_string().lines().next().unwrap_or("")
            );
            x * 2.0
        })
    });
}

#[test]
fn oom_observer_reports_a_forced_oom() {
    check("oom_observer_reports_a_forced_oom", |_| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "memory::oom_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(OOM_CHILD, "1")
            .env_remove("REMAT_GPU_RESULTS")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the child failed ({}):\n{stderr}",
            out.status
        );
        assert!(
            stderr.contains("CUDA out of memory on device 0: 256.00 TiB requested"),
            "{stderr}"
        );
        assert!(
            stderr.contains("remat: the failing allocation was made in oom::huge (forward)"),
            "{stderr}"
        );
        assert!(stderr.contains("child: allocation failed"), "{stderr}");
        "the report names the request and oom::huge (forward)".into()
    });
}

#[test]
fn allocation_sites_annotate_the_memory_report() {
    check("allocation_sites_annotate_the_memory_report", |device| {
        record_allocation_sites(true).unwrap();
        let x = Tensor::randn([256, 256], (Kind::Float, device)).set_requires_grad(true);
        let slot: Arc<Mutex<Option<String>>> = Arc::default();
        let s = slot.clone();
        let y = checkpoint("sites").call(&x, move |x| {
            let h = region("exp", Policy::Save).call(&x, |x| x.exp());
            let mut report = memory_report().unwrap();
            report.annotate_allocation_sites().unwrap();
            *s.lock().unwrap() = Some(report.to_string());
            h.sin()
        });
        y.sum(Kind::Float).backward();
        record_allocation_sites(false).unwrap();
        let text = slot.lock().unwrap().take().unwrap();
        assert!(text.contains("allocated in sites::exp (forward)"), "{text}");
        "a kept storage noted `allocated in sites::exp (forward)`".into()
    });
}

/// Bytes the allocator holds after `forward` minus before it: what the
/// graph keeps (and the loss), rounded up to the allocator's blocks.
fn allocated_by(device: Device, forward: impl FnOnce() -> Tensor) -> (Tensor, i64) {
    remat::diagnostics::device::synchronize(device);
    let before = cuda_memory(device).unwrap().allocated;
    let loss = forward();
    remat::diagnostics::device::synchronize(device);
    (loss, cuda_memory(device).unwrap().allocated - before)
}

#[test]
fn planner_predicted_bytes_against_the_allocator() {
    check("planner_predicted_bytes_against_the_allocator", |device| {
        let model = Model::on(MEDIUM, 0, device);
        let (x, y) = batch_on(MEDIUM, 1, device);
        // Gradients exist before the measured forward, so that it allocates
        // only what it keeps.
        model.loss(&x, &y, ModelPolicy::None).backward();
        let profile = planner::profile(|| model.loss(&x, &y, ModelPolicy::Auto)).unwrap();
        let least = Plan::minimum(&profile).predicted.kept_bytes;
        let plan = Plan::for_budget(&profile, least * 2).unwrap();
        let predicted = plan.predicted.kept_bytes;
        let (loss, measured) = allocated_by(device, || {
            plan.scope(|| model.loss(&x, &y, ModelPolicy::Auto))
        });
        loss.backward();
        // The allocator rounds each block up to 512 bytes and the forward
        // leaves the loss and a few scalars: within 5% plus 1 MiB.
        let slack = predicted / 20 + (1 << 20);
        assert!(
            (measured - predicted).abs() <= slack,
            "predicted {predicted} bytes kept, the allocator counts {measured}"
        );
        format!("predicted {predicted} B, allocator {measured} B")
    });
}

/// The peak contract on CUDA (docs/planner.md, "The peak contract"): the
/// profile's levels come from the caching allocator, and the allocator's
/// peak during each plan's backward (over what was allocated before its
/// forward) is within `peak_tolerance` of the predicted peak, at five peak
/// budgets from the least to what the model keeps with no checkpoint.
#[test]
fn planner_predicted_peak_against_the_allocator() {
    check("planner_predicted_peak_against_the_allocator", |device| {
        let model = Model::on(MEDIUM, 0, device);
        let (x, y) = batch_on(MEDIUM, 1, device);
        model.loss(&x, &y, ModelPolicy::None).backward();
        let profile = planner::profile(|| model.loss(&x, &y, ModelPolicy::Auto)).unwrap();
        assert!(
            profile.backward.is_some(),
            "no levels from the caching allocator"
        );
        let least = Plan::minimum_peak(&profile).predicted.peak_bytes;
        let none = Plan::from_choices(&profile, &vec![0; profile.layers.len()]).unwrap();
        let most = none.predicted.peak_bytes;
        let mut rows = Vec::new();
        for step in 0..=4 {
            let plan = Plan::for_peak_budget(&profile, least + (most - least) * step / 4).unwrap();
            model.zero_grad();
            remat::diagnostics::device::synchronize(device);
            let base = cuda_memory(device).unwrap().allocated;
            let loss = plan.scope(|| model.loss(&x, &y, ModelPolicy::Auto));
            remat::diagnostics::device::synchronize(device);
            reset_cuda_peak(device).unwrap();
            loss.backward();
            remat::diagnostics::device::synchronize(device);
            let measured = cuda_memory(device).unwrap().peak_allocated - base;
            let predicted = plan.predicted.peak_bytes;
            assert!(
                (measured - predicted).abs() <= planner::peak_tolerance(predicted),
                "predicted peak {predicted} B, the allocator's {measured} B\n{plan}"
            );
            rows.push(format!("{predicted}/{measured}"));
        }
        format!("predicted/measured peak: {}", rows.join(" "))
    });
}

#[test]
fn peak_memory_per_policy_from_the_allocator() {
    check("peak_memory_per_policy_from_the_allocator", |device| {
        let model = Model::on(MEDIUM, 0, device);
        let (x, y) = batch_on(MEDIUM, 1, device);
        model.loss(&x, &y, ModelPolicy::None).backward();
        let mut peaks = Vec::new();
        for policy in POLICIES {
            model.zero_grad();
            remat::diagnostics::device::synchronize(device);
            let base = cuda_memory(device).unwrap().allocated;
            reset_cuda_peak(device).unwrap();
            model.loss(&x, &y, policy).backward();
            remat::diagnostics::device::synchronize(device);
            peaks.push((policy, cuda_memory(device).unwrap().peak_allocated - base));
        }
        let of = |p| peaks.iter().find(|(q, _)| *q == p).unwrap().1;
        assert!(of(ModelPolicy::Full) < of(ModelPolicy::None), "{peaks:?}");
        assert!(
            of(ModelPolicy::Selective) < of(ModelPolicy::None),
            "{peaks:?}"
        );
        assert!(
            of(ModelPolicy::SaveMlp) < of(ModelPolicy::None),
            "{peaks:?}"
        );
        peaks
            .iter()
            .map(|(p, b)| format!("{p:?}={b}"))
            .collect::<Vec<_>>()
            .join(" ")
    });
}
