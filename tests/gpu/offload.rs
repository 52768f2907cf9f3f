//! `Offload` on CUDA (docs/semantics.md, rules O1, O5 and O6): what a
//! hand policy saves, offloaded to the CPU through the side stream, gives
//! that policy's gradients bitwise, and the device holds less by the bytes
//! moved (the caching allocator's count, not remat's).

use crate::{assert_same_grads, check, run};
use remat::diagnostics::device::{cuda_memory, synchronize};
use remat::diagnostics::{saved_tensors_report, track_saved_tensors};
use remat::policies::PolicyTable;
use remat_reference::model::{batch_on, Model, ModelPolicy, MEDIUM};
use tch::Tensor;

#[test]
fn offload_to_the_cpu_keeps_gradients_and_frees_the_device() {
    check(
        "offload_to_the_cpu_keeps_gradients_and_frees_the_device",
        |device| {
            let model = Model::on(MEDIUM, 0, device);
            let (x, y) = batch_on(MEDIUM, 1, device);
            // Gradients exist before the measured forwards.
            model.loss(&x, &y, ModelPolicy::None).backward();
            let plain = |f: &dyn Fn() -> Tensor| f();
            let mut details = Vec::new();
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
                let (loss, want) = run(&model, &x, &y, hand, &plain);
                let (l, got) = run(&model, &x, &y, ModelPolicy::Auto, &|f| {
                    table.scope(f).unwrap()
                });
                assert!(l == loss, "{hand:?} offloaded: the loss differs");
                assert_same_grads(&got, &want, &format!("{hand:?} offloaded"));
                let allocated = |forward: &dyn Fn() -> Tensor| {
                    synchronize(device);
                    let before = cuda_memory(device).unwrap().allocated;
                    let (loss, outside) = track_saved_tensors(forward);
                    synchronize(device);
                    let after = cuda_memory(device).unwrap().allocated;
                    let moved = saved_tensors_report(Some(&outside)).offloaded_bytes();
                    loss.backward();
                    (after - before, moved)
                };
                let (kept, _) = allocated(&|| model.loss(&x, &y, hand));
                let (left, moved) = allocated(&|| {
                    table
                        .scope(|| model.loss(&x, &y, ModelPolicy::Auto))
                        .unwrap()
                });
                assert!(moved > 0, "{hand:?}: nothing was offloaded");
                // The allocator rounds blocks up: within 5% plus 1 MiB.
                let slack = moved / 20 + (1 << 20);
                assert!(
                    ((kept - left) - moved).abs() <= slack,
                    "{hand:?}: saving holds {kept} B on the device, offloading {left} B, \
                     remat says {moved} B moved"
                );
                details.push(format!(
                    "{hand:?}: {kept} B kept vs {left} B, {moved} B moved"
                ));
            }
            details.join("; ")
        },
    );
}
