//! Fault paths: a panic or error in each piece of user code the runtime
//! calls (the closure, a region's body, a state hook, a saved-tensor hook, a
//! custom function), on the forward and on replay. For each: the error says
//! which checkpoint failed and what happened; the thread's state is as
//! before (grad mode, no frame, no pack in progress, no hook of remat left:
//! a later checkpoint records and backpropagates exactly); and once the
//! graph is dropped, no checkpoint state and no kept storage survives.
//!
//! A test binary of its own: it reads the process-wide count of live
//! checkpoints.

use remat_reference::testing as common;

use common::{assert_bitwise, input};
use remat::{
    autograd::apply, autograd::grad_enabled, autograd::BackwardContext, autograd::ForwardContext,
    autograd::Function, checkpoint, current_saved_tensor_info, diagnostics::live_checkpoints,
    diagnostics::memory_report, is_recomputing, recompute_needs_tensor, region,
    storage::WeakStorage, Policy, RecomputeStateHook, Result, TensorHooks,
};
use std::any::Any;
use std::sync::{Arc, Mutex};
use tch::{Kind, Tensor};

/// Where a fault strikes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum When {
    Forward,
    Replay,
}

fn strikes(when: When) -> bool {
    (when == When::Replay) == is_recomputing()
}

/// A state hook that panics in `snapshot` (at checkpoint entry: forward)
/// or in `restore` (replay).
struct FaultyHook(When);

impl RecomputeStateHook for FaultyHook {
    fn snapshot(&self) -> Box<dyn Any + Send> {
        if self.0 == When::Forward {
            panic!("snapshot failed");
        }
        Box::new(())
    }
    fn restore(&self, _: &(dyn Any + Send)) {
        if self.0 == When::Replay {
            panic!("restore failed");
        }
    }
}

/// `exp` with a backward that panics, or a forward that panics on replay.
struct FaultyExp {
    backward_panics: bool,
}

impl Function for FaultyExp {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        if !self.backward_panics && is_recomputing() {
            panic!("custom forward failed on replay");
        }
        let y = inputs[0].exp();
        ctx.save_for_backward([("y", &y)]);
        Ok(vec![y])
    }

    fn backward(&mut self, ctx: &BackwardContext<'_>, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        if self.backward_panics {
            panic!("custom backward failed");
        }
        Ok(vec![Some(&g[0] * ctx.saved("y")?)])
    }
}

/// The faults, each run as one forward (and backward) of a checkpoint
/// named `c`; a weak handle to a tensor the checkpoint keeps is noted.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Closure(When),
    RegionBody(When),
    StateHook(When),
    PackHook,
    UnpackHook,
    CustomBackward,
    CustomForwardOnReplay,
}

/// Runs `fault`; returns the error text and a weak handle to the kept value.
fn run(fault: Fault) -> (String, WeakStorage) {
    let x = input();
    let kept: Arc<Mutex<Option<WeakStorage>>> = Arc::default();
    let k = kept.clone();
    let mut ckpt = checkpoint("c");
    if let Fault::StateHook(when) = fault {
        ckpt = ckpt.state_hook(FaultyHook(when));
    }
    if matches!(fault, Fault::PackHook | Fault::UnpackHook) {
        let pack_panics = matches!(fault, Fault::PackHook);
        ckpt = ckpt.saved_tensors_hooks(TensorHooks::new(
            move |t: Tensor| {
                if pack_panics && current_saved_tensor_info().is_some() && t.dim() == 2 {
                    panic!("pack failed");
                }
                t
            },
            move |t: &Tensor| {
                if !pack_panics {
                    panic!("unpack failed");
                }
                t.shallow_clone()
            },
        ));
    }
    let body = move |x: Tensor| {
        if let Fault::Closure(when) = fault {
            if strikes(when) {
                panic!("closure failed");
            }
        }
        let h = region("keep", Policy::Save).call(&x, |x| x.exp() * 2.0);
        if !is_recomputing() {
            *k.lock().unwrap() = WeakStorage::new(&h);
        }
        recompute_needs_tensor(&h);
        let m = region("body", Policy::Recompute).call(&h, |h| {
            if let Fault::RegionBody(when) = fault {
                if strikes(when) {
                    panic!("region body failed");
                }
            }
            h.sin()
        });
        let m = match fault {
            Fault::CustomBackward | Fault::CustomForwardOnReplay => apply(
                FaultyExp {
                    backward_panics: matches!(fault, Fault::CustomBackward),
                },
                &[&m],
            )
            .remove(0),
            _ => m,
        };
        m.sum(Kind::Float)
    };
    let error = match ckpt.try_call(&x, body) {
        Err(e) => e.to_string(),
        Ok(y) => match y.f_backward() {
            Err(e) => remat::Error::from(e).to_string(),
            Ok(()) => String::new(),
        },
    };
    let weak = kept
        .lock()
        .unwrap()
        .take()
        .unwrap_or_else(|| WeakStorage::new(&x).unwrap());
    (error, weak)
}

/// The thread is as before, and a later checkpoint works exactly.
fn assert_thread_clean(grad_before: bool) {
    assert_eq!(grad_enabled(), grad_before, "grad mode");
    assert!(!is_recomputing(), "a replay frame is left");
    assert!(memory_report().is_err(), "a checkpoint frame is left");
    assert!(
        current_saved_tensor_info().is_none(),
        "a pack is in progress"
    );
    let x = input();
    let y = checkpoint("after").call(&x, |x| {
        let h = region("s", Policy::Save).call(&x, |x| x.exp());
        recompute_needs_tensor(&h);
        h.sin().sum(Kind::Float)
    });
    assert!(y.requires_grad(), "the next checkpoint records a graph");
    y.backward();
    let plain = input();
    plain.exp().sin().sum(Kind::Float).backward();
    assert_bitwise(&x.grad(), &plain.grad(), "gradients after the failure");
}

#[test]
// docs/semantics.md, rules C11, C12, H5 and T8; M3 once the graph is dropped.
fn every_fault_is_reported_and_leaves_nothing_behind() {
    use Fault::*;
    use When::*;
    let cases: [(Fault, &[&str]); 10] = [
        (Closure(Forward), &["checkpoint `c`", "closure failed"]),
        (
            Closure(Replay),
            &["checkpoint `c`: replay failed", "closure failed"],
        ),
        (
            RegionBody(Forward),
            &["checkpoint `c`", "region body failed"],
        ),
        (
            RegionBody(Replay),
            &["checkpoint `c`: replay failed", "region body failed"],
        ),
        (StateHook(Forward), &["checkpoint `c`", "snapshot failed"]),
        (StateHook(Replay), &["checkpoint `c`", "restore failed"]),
        (
            PackHook,
            &["checkpoint `c`", "pack hook panicked: pack failed"],
        ),
        (
            UnpackHook,
            &["checkpoint `c`", "unpack hook panicked: unpack failed"],
        ),
        (
            CustomBackward,
            &[
                "custom function",
                "backward panicked: custom backward failed",
            ],
        ),
        (
            CustomForwardOnReplay,
            &[
                "checkpoint `c`: replay failed",
                "custom forward failed on replay",
            ],
        ),
    ];
    let before = live_checkpoints();
    for (fault, expected) in cases {
        let grad = grad_enabled();
        let (error, weak) = run(fault);
        for part in expected {
            assert!(
                error.contains(part),
                "{fault:?}: {part:?} not in the error: {error:?}"
            );
        }
        assert_thread_clean(grad);
        assert_eq!(live_checkpoints(), before, "{fault:?}: state left behind");
        assert!(!weak.is_alive(), "{fault:?}: a kept storage survives");
    }
}
