//! The stock RNG state hook. A test binary of its own: libtorch's generator
//! is process-wide, and other tests draw from it.

use remat_reference::testing as common;

use common::assert_bitwise;
use remat::{autograd::rng_state, checkpoint, region, Policy, RngStateHook};
use tch::{Device, Kind, Tensor};

fn body(x: &Tensor) -> Tensor {
    let h = region("drop", Policy::Recompute).call(&(x * 2), |h| h.dropout(0.5, true));
    h.sin().sum(Kind::Float)
}

#[test]
// docs/semantics.md, rules H3 and H6 (the outer stream is restored also when recomputation fails).
fn dropout_replays_the_forward_mask_and_the_outer_stream_is_untouched() {
    let x = Tensor::linspace(-1.0, 1.0, 256, (Kind::Float, Device::Cpu)).set_requires_grad(true);

    tch::manual_seed(5);
    body(&x).backward();
    let plain = x.grad().copy();
    let _ = x.grad().zero_();

    tch::manual_seed(5);
    let y = checkpoint("c")
        .state_hook(RngStateHook::cpu())
        .call(&x, |x| body(&x));
    let before = rng_state(Device::Cpu).unwrap();
    y.backward();
    let after = rng_state(Device::Cpu).unwrap();
    assert_bitwise(&x.grad(), &plain, "gradient");
    assert!(
        before.equal(&after),
        "replay's draws leaked into the outer generator"
    );

    // A replay that fails after drawing still puts the outer stream back.
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let y = checkpoint("failing")
        .state_hook(RngStateHook::cpu())
        .call(&x, move |x| {
            let h = region("drop", Policy::Recompute).call(&x, |x| x.dropout(0.5, true));
            if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                panic!("replay exploded after drawing");
            }
            h.sum(Kind::Float)
        });
    let before = rng_state(Device::Cpu).unwrap();
    let err = remat::autograd::backward_with(&y, false).unwrap_err();
    assert!(err.to_string().contains("replay exploded"), "{err}");
    assert!(rng_state(Device::Cpu).unwrap().equal(&before));

    // Without the hook, replay draws a different mask: the gradient differs.
    let _ = x.grad().zero_();
    tch::manual_seed(5);
    checkpoint("c").call(&x, |x| body(&x)).backward();
    assert!(!x.grad().equal(&plain));
}
