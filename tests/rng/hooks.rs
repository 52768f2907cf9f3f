//! The stock RNG state hook, and a hand-written one.

use remat::autograd::GeneratorLock;
use remat::{autograd::rng_state, checkpoint, region, Policy, RecomputeStateHook, RngStateHook};
use remat_reference::testing::assert_bitwise;
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tch::{Device, Kind, Tensor};

fn body(x: &Tensor) -> Tensor {
    let h = region("drop", Policy::Recompute).call(&(x * 2), |h| h.dropout(0.5, true));
    h.sin().sum(Kind::Float)
}

#[test]
// docs/semantics.md, rules H3 and H6 (the outer stream is restored also when recomputation fails).
fn dropout_replays_the_forward_mask_and_the_outer_stream_is_untouched() {
    let _generator = GeneratorLock::acquire();
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
            // `sin` saves `h`: the panic comes before the last save, so an
            // early stop (rule C17) does not skip it.
            h.sin().sum(Kind::Float)
        });
    let before = rng_state(Device::Cpu).unwrap();
    let err = remat::autograd::backward_with(&y, false).unwrap_err();
    assert!(err.to_string().contains("replay exploded"), "{err}");
    assert!(rng_state(Device::Cpu).unwrap().equal(&before));

    // Opted out of the default (rule C14) and without the hook, replay
    // draws a different mask: the gradient differs.
    let _ = x.grad().zero_();
    tch::manual_seed(5);
    checkpoint("c")
        .preserve_rng_state(false)
        .call(&x, |x| body(&x))
        .backward();
    assert!(!x.grad().equal(&plain));
}

#[test]
// docs/semantics.md, rules H3 and C14.
fn dropout_replays_identically_with_a_state_hook_around_the_rng() {
    let _generator = GeneratorLock::acquire();
    struct Seed(Arc<AtomicU64>);
    impl RecomputeStateHook for Seed {
        fn snapshot(&self) -> Box<dyn Any + Send> {
            Box::new(self.0.load(Ordering::SeqCst))
        }
        fn restore(&self, s: &(dyn Any + Send)) {
            self.0
                .store(*s.downcast_ref::<u64>().unwrap(), Ordering::SeqCst);
        }
    }
    // Each dropout seeds libtorch's generator from the counter, then advances it.
    let seed = Arc::new(AtomicU64::new(1));
    let s = seed.clone();
    let x = Tensor::ones([64], tch::kind::FLOAT_CPU).set_requires_grad(true);
    let masks = Arc::new(Mutex::new(Vec::new()));
    let m = masks.clone();
    let y = checkpoint("c")
        .state_hook(Seed(seed.clone()))
        .call(&x, move |x| {
            tch::manual_seed(s.fetch_add(1, Ordering::SeqCst) as i64);
            let h = x.dropout(0.5, true);
            m.lock()
                .unwrap()
                .push(Vec::<f32>::try_from(h.detach()).unwrap());
            h.sin()
        });
    y.sum(Kind::Float).backward();
    let masks = masks.lock().unwrap();
    assert_eq!(masks.len(), 2);
    assert_eq!(masks[0], masks[1]);
}
