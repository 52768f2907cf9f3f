//! Early stop on CUDA (docs/semantics.md, rules C17 and A2): the stop's
//! fallback makes placeholders on the CUDA device from meta kernels, and
//! under CUDA autocast through autocast's casts; gradients are bitwise the
//! whole recomputation's.

use crate::check;
use remat::autograd::is_placeholder;
use remat::{autocast, checkpoint, is_recomputing};
use std::sync::{Arc, Mutex};
use tch::{Device, Kind, Tensor};

/// The gradient of `x` and, for the recomputation, whether the tail was
/// dry, its dtype and its device.
fn run(device: Device, early_stop: bool) -> (Vec<f32>, Option<(bool, Kind, Device)>) {
    // Large enough (`ENDS_OP_FROM` elements) that the stop ends its op.
    let x = Tensor::linspace(-1.0, 1.0, 256 * 256, (Kind::Float, device))
        .reshape([256, 256])
        .set_requires_grad(true);
    let w = Tensor::linspace(0.5, -0.5, 256 * 256, (Kind::Float, device)).reshape([256, 256]);
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let y = autocast(device, Kind::Half, || {
        checkpoint("cuda_tail")
            .early_stop(early_stop)
            .call(&x, move |x| {
                let h = x.matmul(&w).tanh(); // tanh saves its output: the last save
                let out = h.matmul(&w) + 1.0; // the tail: fp16 under autocast
                if is_recomputing() {
                    *s.lock().unwrap() = Some((is_placeholder(&out), out.kind(), out.device()));
                }
                out
            })
    });
    y.to_kind(Kind::Float).sum(Kind::Float).backward();
    let grad = Vec::<f32>::try_from(x.grad().to(Device::Cpu).view([-1])).unwrap();
    let seen = *seen.lock().unwrap();
    (grad, seen)
}

#[test]
fn cuda_early_stop_runs_the_tail_dry_under_autocast() {
    check(
        "cuda_early_stop_runs_the_tail_dry_under_autocast",
        |device| {
            let (stopped, tail) = run(device, true);
            let (whole, whole_tail) = run(device, false);
            assert!(
                stopped
                    .iter()
                    .map(|v| v.to_bits())
                    .eq(whole.iter().map(|v| v.to_bits())),
                "the gradient with early stop differs from the whole recomputation's"
            );
            assert_eq!(tail, Some((true, Kind::Half, device)), "the dry tail");
            assert_eq!(
                whole_tail,
                Some((false, Kind::Half, device)),
                "the whole tail"
            );
            "fp16 autocast: the tail a CUDA placeholder of the forward's dtype, gradients bitwise"
                .into()
        },
    );
}
