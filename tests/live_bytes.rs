//! An independent measure of what each policy keeps: the C heap's bytes in
//! use (glibc's own count) across the reference model's forward, at the
//! forward→backward point, compared with remat's saved-for-backward report.
//!
//! `harness = false`: glibc counts the main thread's arena (and every
//! mmapped block), so this runs on the main thread, with one intra-op
//! thread and a fixed mmap threshold (the binary re-runs itself with
//! `MALLOC_MMAP_THRESHOLD_` set, since glibc reads it at start-up).

use remat::{
    diagnostics::heap_bytes_in_use, diagnostics::saved_tensors_report,
    diagnostics::track_saved_tensors, policies::PolicyTable,
};
use remat_reference::model::{batch, Model, ModelPolicy, POLICIES, SMALL};

struct Measure {
    policy: ModelPolicy,
    /// Heap growth across the forward, with the graph alive.
    live: i64,
    /// What remat's report says is saved for backward.
    reported: i64,
    /// What it says `offload` regions moved off.
    moved: i64,
}

fn measure(model: &Model, policy: ModelPolicy) -> Measure {
    let (tokens, targets) = batch(SMALL, 1);
    // A first run warms libtorch's one-time allocations (kernels, caches).
    model.loss(&tokens, &targets, policy).backward();
    model.zero_grad();
    let before = heap_bytes_in_use().expect("glibc");
    let (loss, outside) = track_saved_tensors(|| model.loss(&tokens, &targets, policy));
    let live = heap_bytes_in_use().unwrap() as i64 - before as i64;
    let report = saved_tensors_report(Some(&outside));
    let reported =
        report.checkpoint_bytes() + report.input_bytes() + report.outside_bytes().unwrap();
    let moved = report.offloaded_bytes();
    loss.backward();
    Measure {
        policy,
        live,
        reported,
        moved,
    }
}

// docs/semantics.md, rule M5, measured independently of remat's own count.
fn main() {
    if heap_bytes_in_use().is_none() {
        println!("live_bytes: not glibc, nothing to measure");
        return;
    }
    // glibc reads its tunables at start-up: run again in a child that has
    // a fixed mmap threshold (no tensor moves between arena and mmap).
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .env("MALLOC_MMAP_THRESHOLD_", "65536")
            .status()
            .expect("re-run with a fixed mmap threshold");
        std::process::exit(status.code().unwrap_or(1));
    }
    tch::set_num_threads(1);
    let model = Model::new(SMALL, 0);
    let rows: Vec<Measure> = POLICIES.iter().map(|&p| measure(&model, p)).collect();
    println!("{:<10} {:>12} {:>12}", "policy", "heap growth", "reported");
    for r in &rows {
        println!(
            "{:<10} {:>12} {:>12}",
            format!("{:?}", r.policy),
            r.live,
            r.reported
        );
    }
    // docs/semantics.md, rule O1, measured by the heap: offloading (to the
    // CPU, here the same memory) what a hand policy saves holds the same
    // bytes, so the originals were freed and only the copies live; remat
    // bills the copies as offloaded, apart from what it keeps.
    for (hand, table) in [
        (
            ModelPolicy::Selective,
            PolicyTable::save_and_offload_only(Vec::<String>::new(), ["attention"]),
        ),
        (
            ModelPolicy::SaveMlp,
            PolicyTable::new().offload("*::*").recompute("attention"),
        ),
    ] {
        let active = table.strict(true).activate().unwrap();
        let offloaded = measure(&model, ModelPolicy::Auto);
        drop(active);
        let kept = rows.iter().find(|r| r.policy == hand).unwrap();
        let full = rows.iter().find(|r| r.policy == ModelPolicy::Full).unwrap();
        println!(
            "{:<10} {:>12} {:>12}  (offloaded: {} by remat's report)",
            format!("{hand:?}/off"),
            offloaded.live,
            offloaded.reported,
            offloaded.moved
        );
        assert!(
            (offloaded.live - kept.live).abs() <= 128 * 1024,
            "{hand:?} offloaded: the heap holds {} bytes, {} when saved: the originals \
             were not freed",
            offloaded.live,
            kept.live
        );
        assert_eq!(
            offloaded.reported, full.reported,
            "{hand:?}: kept on the device"
        );
        assert_eq!(
            offloaded.moved,
            kept.reported - full.reported,
            "{hand:?}: offloaded"
        );
    }
    let live = |p: ModelPolicy| rows.iter().find(|r| r.policy == p).unwrap().live;
    use ModelPolicy::*;
    // What each policy keeps, by the heap: full < selective < save_mlp <
    // none (docs/reference-model.md: the MLP's saves outweigh attention's).
    assert!(
        live(Full) < live(Selective)
            && live(Selective) < live(SaveMlp)
            && live(SaveMlp) < live(None),
        "the heap does not order the policies as expected"
    );
    // remat's report agrees with the heap: what it bills is live, and what
    // else is live (the graph's nodes, the loss, allocator overhead) is
    // small next to the differences between policies.
    for r in &rows {
        let unreported = r.live - r.reported;
        assert!(
            (0..=128 * 1024).contains(&unreported),
            "{:?}: the heap holds {} bytes, the report says {}",
            r.policy,
            r.live,
            r.reported
        );
    }
    // Checkpointing every block drops most of what a plain forward keeps.
    assert!(
        live(Full) * 10 < live(None) * 3,
        "full keeps {} of none's {} bytes",
        live(Full),
        live(None)
    );
    println!("live_bytes: 1 passed, 0 failed");
}
