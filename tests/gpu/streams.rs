//! Where replay runs on CUDA: on autograd's worker thread for the device
//! (not the thread that called backward), and on the stream the forward's
//! ops ran on when that was not the default stream.

use crate::{assert_same_grads, check, grads};
use remat::diagnostics::device::{current_stream, on_side_stream};
use remat::{checkpoint, is_recomputing};
use remat_reference::model::{batch_on, block_body, Model, ModelPolicy, MEDIUM};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use tch::Tensor;

/// The model's loss with every block a checkpoint that notes, on replay,
/// the thread and the current stream it replays on.
fn noting_loss(
    model: &Model,
    x: &Tensor,
    y: &Tensor,
    seen: &Arc<Mutex<Vec<(ThreadId, i64)>>>,
) -> Tensor {
    let device = model.device();
    model.loss_through(x, y, |mut h| {
        for block in &model.blocks {
            let (b, seen) = (block.shallow(), seen.clone());
            h = checkpoint(format!("layers.{}", block.index)).call(&h, move |h| {
                if is_recomputing() {
                    let stream = current_stream(device).unwrap();
                    seen.lock()
                        .unwrap()
                        .push((std::thread::current().id(), stream));
                }
                block_body(&b, &h, ModelPolicy::Selective)
            });
        }
        h
    })
}

fn backward_of(model: &Model, loss: impl FnOnce() -> Tensor) -> Vec<(String, Tensor)> {
    model.zero_grad();
    loss().backward();
    grads(model)
}

#[test]
fn replay_runs_on_autograds_device_thread() {
    check("replay_runs_on_autograds_device_thread", |device| {
        let model = Model::on(MEDIUM, 0, device);
        let (x, y) = batch_on(MEDIUM, 1, device);
        let want = backward_of(&model, || model.loss(&x, &y, ModelPolicy::None));
        let seen = Arc::default();
        let got = backward_of(&model, || noting_loss(&model, &x, &y, &seen));
        assert_same_grads(&got, &want, "checkpoints noting their replay");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), MEDIUM.l as usize, "one replay per block");
        let me = std::thread::current().id();
        assert!(
            seen.iter().all(|(t, _)| *t != me),
            "CUDA backward replays on autograd's device thread, not the caller's"
        );
        format!("{} replays, none on the calling thread", seen.len())
    });
}

#[test]
fn a_forward_on_a_side_stream_replays_on_that_stream() {
    check(
        "a_forward_on_a_side_stream_replays_on_that_stream",
        |device| {
            let model = Model::on(MEDIUM, 0, device);
            let (x, y) = batch_on(MEDIUM, 1, device);
            let seen = Arc::default();
            // The parameters and the batch were copied on the default
            // stream: the side stream must not read them before that ends.
            remat::diagnostics::device::synchronize(device);
            let (want, got, id) = on_side_stream(device, |id| {
                let want = backward_of(&model, || model.loss(&x, &y, ModelPolicy::None));
                let got = backward_of(&model, || noting_loss(&model, &x, &y, &seen));
                (want, got, id)
            })
            .unwrap();
            remat::diagnostics::device::synchronize(device);
            assert_ne!(id, 0, "a pool stream is not the default stream");
            assert_same_grads(&got, &want, "checkpoints on a side stream");
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), MEDIUM.l as usize, "one replay per block");
            assert!(
                seen.iter().all(|(_, s)| *s == id),
                "replay ran on streams {:?}, the forward on {id}",
                seen.iter().map(|(_, s)| *s).collect::<Vec<_>>()
            );
            format!("forward and replay on stream {id}")
        },
    );
}
