//! Saves, persistence, nesting, faults, retain_graph, state hooks,
//! determinism and threads, on small closures whose work can be counted.

use crate::common::{assert_bitwise, counter, grad_of, input};
use remat::{
    autograd::backward_with, autograd::is_placeholder, checkpoint, is_recomputing,
    recompute_needs_tensor, region, Determinism, Policy, RecomputeStateHook,
};
use std::any::Any;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tch::{Device, Kind, Tensor};

#[test]
// docs/semantics.md, rules R3 and C6.
fn save_bodies_run_once_and_recompute_bodies_replay_once_per_backward() {
    let (saves, recomputes, bare) = (counter(), counter(), counter());
    let (s, r, b) = (saves.clone(), recomputes.clone(), bare.clone());
    let x = input();
    let y = checkpoint("c").call(&x, move |x| {
        b.fetch_add(1, Ordering::SeqCst);
        let a = region("a", Policy::Save).call(&x, |x| {
            s.fetch_add(1, Ordering::SeqCst);
            x.sin().exp()
        });
        recompute_needs_tensor(&a);
        region("m", Policy::Recompute).call(&(&a * 3), |h| {
            r.fetch_add(1, Ordering::SeqCst);
            h.tanh().sum(Kind::Float)
        })
    });
    let counts = |c: &Arc<AtomicUsize>| c.load(Ordering::SeqCst);
    assert_eq!(
        (counts(&saves), counts(&recomputes), counts(&bare)),
        (1, 1, 1)
    );
    let g = grad_of(&x, &y);
    assert_eq!(
        (counts(&saves), counts(&recomputes), counts(&bare)),
        (1, 2, 2)
    );
    let expected = {
        let x2 = input();
        grad_of(&x2, &(x2.sin().exp() * 3).tanh().sum(Kind::Float))
    };
    assert_bitwise(&g, &expected, "gradient");
}

/// Records, during replay, whether the value bare code sees is a placeholder
/// (`None` if replay never ran).
fn replay_sees(consumer: Policy, mark: bool) -> (Option<bool>, Result<Tensor, String>) {
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let x = input();
    let y = checkpoint("blk").call(&x, move |x| {
        let a = region("producer", Policy::Save).call(&x, |x| x * 2);
        if mark {
            recompute_needs_tensor(&a);
        }
        let c = region("consumer", consumer).call(&a, |a| a.sin());
        recompute_needs_tensor(&c);
        if is_recomputing() {
            *s.lock().unwrap() = Some(is_placeholder(&a));
        }
        c.cos()
    });
    let result = y
        .sum(Kind::Float)
        .f_backward()
        .map(|_| x.grad())
        .map_err(|e| remat::Error::from(e).to_string());
    let seen = *seen.lock().unwrap();
    (seen, result)
}

#[test]
// docs/semantics.md, rules K2 and P2.
fn a_save_output_consumed_by_a_recompute_region_is_served() {
    let (placeholder, result) = replay_sees(Policy::Recompute, false);
    assert_eq!(placeholder, Some(false), "replay ran and saw the value");
    let g = result.unwrap();
    let x = input();
    let expected = grad_of(&x, &(&x * 2).sin().cos().sum(Kind::Float));
    assert_bitwise(&g, &expected, "gradient");
}

#[test]
// docs/semantics.md, rules K3 and P4.
fn a_save_output_consumed_only_by_save_regions_is_a_placeholder() {
    let (placeholder, result) = replay_sees(Policy::Save, false);
    assert_eq!(placeholder, Some(true), "replay ran and saw a placeholder");
    assert!(result.unwrap().defined());
}

#[test]
// docs/semantics.md, rules K4 and P4 (E13).
fn a_bare_read_without_the_mark_fails_on_replay_with_the_fix() {
    let x = input();
    let y = checkpoint("layers.3").call(&x, |x| {
        let a = region("attention", Policy::Save).call(&x, |x| x * 2);
        (&a + 1.0).sin()
    });
    let err = remat::Error::from(y.sum(Kind::Float).f_backward().unwrap_err()).to_string();
    for part in [
        "`layers.3::attention.out` is a placeholder",
        "recompute_needs_tensor",
        "checkpoint `layers.3`",
    ] {
        assert!(err.contains(part), "missing {part:?} in: {err}");
    }
}

#[test]
// docs/semantics.md, rule K4.
fn with_the_mark_the_bare_read_works() {
    let x = input();
    let y = checkpoint("c").call(&x, |x| {
        let a = region("attention", Policy::Save).call(&x, |x| x * 2);
        recompute_needs_tensor(&a);
        (&a + 1.0).sin()
    });
    let g = grad_of(&x, &y.sum(Kind::Float));
    let x2 = input();
    assert_bitwise(
        &g,
        &grad_of(&x2, &((&x2 * 2) + 1.0).sin().sum(Kind::Float)),
        "gradient",
    );
}

#[test]
// docs/semantics.md, rules K2 and K6.
fn a_bare_view_passed_to_a_recompute_region_persists_the_producer() {
    let x = input();
    let y = checkpoint("c").call(&x, |x| {
        let a = region("p", Policy::Save).call(&x, |x| x * 2);
        let v = a.narrow(0, 1, 1);
        region("q", Policy::Recompute).call(&v, |v| v.sin())
    });
    let g = grad_of(&x, &y.sum(Kind::Float));
    let x2 = input();
    assert_bitwise(
        &g,
        &grad_of(&x2, &(&x2 * 2).narrow(0, 1, 1).sin().sum(Kind::Float)),
        "gradient",
    );
}

#[test]
// docs/semantics.md, rule S8.
fn an_output_its_own_region_saves_is_persisted_for_free() {
    let x = input();
    // exp saves its result: the output is resident anyway, so bare code may read it.
    let y = checkpoint("c").call(&x, |x| {
        let a = region("p", Policy::Save).call(&x, |x| (x * 1.5).exp());
        (&a * 2.0).sin()
    });
    let g = grad_of(&x, &y.sum(Kind::Float));
    let x2 = input();
    assert_bitwise(
        &g,
        &grad_of(&x2, &((&x2 * 1.5).exp() * 2.0).sin().sum(Kind::Float)),
        "gradient",
    );
}

#[test]
// docs/semantics.md, rule S3.
fn saved_inputs_and_views_of_them_are_rebuilt_and_gradients_stay_exact() {
    // sin saves its input; linear on a 3-D input saves a 2-D view of it.
    let x = Tensor::randn([2, 3, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let w = Tensor::randn([5, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let run = |x: &Tensor, w: &Tensor, ckpt: bool| {
        let body = |x: &Tensor, w: &Tensor| {
            let h = x.tanh();
            let a = region("lin", Policy::Save)
                .call((&h, w), |(h, w)| h.linear::<Tensor>(w, None).sin());
            recompute_needs_tensor(&a);
            a * 3
        };
        if ckpt {
            let w = w.shallow_clone();
            checkpoint("c").call(x, move |x| body(&x, &w))
        } else {
            body(x, w)
        }
    };
    let loss = run(&x, &w, true).sum(Kind::Float);
    loss.backward();
    let (gx, gw) = (x.grad().copy(), w.grad().copy());
    let _ = x.grad().zero_();
    let _ = w.grad().zero_();
    run(&x, &w, false).sum(Kind::Float).backward();
    assert_bitwise(&gx, &x.grad(), "x gradient");
    assert_bitwise(&gw, &w.grad(), "w gradient");
}

#[test]
// docs/semantics.md, rules C6 and S3: with no holder to start it (the bare
// `* 2` saves nothing), the unpack of a rebuilt save starts recomputation.
fn a_rebuilt_save_starts_recomputation_when_it_is_unpacked_first() {
    let body = |x: &Tensor| {
        let h = x * 2.0;
        region("square", Policy::Save).call(&h, |h| h * h)
    };
    let x = input();
    let y = checkpoint("c").call(&x, move |x| body(&x));
    let g = grad_of(&x, &y.sum(Kind::Float));
    let x2 = input();
    assert_bitwise(&g, &grad_of(&x2, &body(&x2).sum(Kind::Float)), "gradient");
}

#[test]
// docs/semantics.md, rule R4 (E4).
fn an_inner_save_in_a_save_is_inert_and_an_inner_recompute_errors() {
    let x = input();
    let y = checkpoint("c").call(&x, |x| {
        let a = region("outer", Policy::Save)
            .call(&x, |x| region("inner", Policy::Save).call(x, |x| x.sin()));
        recompute_needs_tensor(&a);
        a.cos()
    });
    let g = grad_of(&x, &y.sum(Kind::Float));
    let x2 = input();
    assert_bitwise(
        &g,
        &grad_of(&x2, &x2.sin().cos().sum(Kind::Float)),
        "gradient",
    );

    let err = checkpoint("c")
        .try_call(&x, |x| {
            region("outer", Policy::Save).call(&x, |x| {
                region("inner", Policy::Recompute).call(x, |x| x.sin())
            })
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "region `c::inner`: a `recompute` region inside a `save` region never replays"
        ),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rule R2 (E3).
fn duplicate_names_error_with_checkpoint_and_region() {
    let x = input();
    let err = checkpoint("layers.0")
        .try_call(&x, |x| {
            let a = region("attention", Policy::Save).call(&x, |x| x.sin());
            region("attention", Policy::Recompute).call(&a, |a| a.cos())
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("region `layers.0::attention`: the name is used twice in one forward"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rules R5, R11 and C13 (E36; without the path check,
// E6, E7, E8).
fn a_replay_that_takes_another_path_errors() {
    for (name, forward, replay, path_error, count_error) in [
        (
            "missing",
            Policy::Save,
            None,
            "its recomputation ended without entering region `c::r` (`save`, 1 tensor input), which its forward entered at tests/runtime/behaviour.rs:",
            "the forward saved",
        ),
        (
            "policy",
            Policy::Save,
            Some(Policy::Recompute),
            "its recomputation entered region `c::r` (`recompute`, 1 tensor input) at tests/runtime/behaviour.rs:",
            "the forward ran it as `save` but replay runs it as `recompute`",
        ),
        (
            "new save",
            Policy::Recompute,
            Some(Policy::Save),
            "its recomputation entered region `c::r` (`save`, 1 tensor input) at tests/runtime/behaviour.rs:",
            "the forward did not record it",
        ),
    ] {
        for determinism in [Determinism::Metadata, Determinism::None] {
            let x = input();
            // The count (E8) is checked when the closure runs to its end: with
            // early stop, "missing" would stop at its last holder, which gets a
            // tensor of the right shape (rule C17).
            let y = checkpoint("c")
                .early_stop(false)
                .determinism(determinism)
                .call(&x, move |x| {
                    let policy = if is_recomputing() {
                        replay
                    } else {
                        Some(forward)
                    };
                    let h = x.sin();
                    let a = match policy {
                        Some(p) => region("r", p).call(&h, |h| h.exp()),
                        None => h.exp(),
                    };
                    recompute_needs_tensor(&a);
                    a.cos()
                });
            let err =
                remat::Error::from(y.sum(Kind::Float).f_backward().unwrap_err()).to_string();
            let expected = match determinism {
                Determinism::None => count_error,
                _ => path_error,
            };
            assert!(err.contains(expected), "{name}, {determinism:?}: {err}");
        }
    }
}

#[test]
// docs/semantics.md, rule R6 (E5).
fn a_leaf_requiring_grad_as_region_output_errors() {
    let x = input();
    let err = checkpoint("c")
        .try_call(&x, |x| {
            region("alloc", Policy::Recompute).call(&x, |_| {
                Tensor::zeros([2], tch::kind::FLOAT_CPU).set_requires_grad(true)
            })
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("region `c::alloc`: output 0 is a leaf tensor that requires grad"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rule S2 (E11).
fn modifying_a_kept_tensor_in_place_errors_at_backward() {
    let x = input();
    let y = checkpoint("c").call(&x, |x| {
        // `exp` and `sin` save `h`, which the region keeps; the body then
        // modifies `h` in place. The output is another tensor, so the error
        // comes from the kept save, not from a kept output.
        let out = region("p", Policy::Save).call(&x, |x| {
            let mut h = (x * 2).exp();
            let out = h.sin();
            let _ = h.g_add_(&Tensor::ones([2, 2], tch::kind::FLOAT_CPU));
            out
        });
        recompute_needs_tensor(&out);
        out.sum(Kind::Float)
    });
    let err = remat::Error::from(y.f_backward().unwrap_err()).to_string();
    assert!(
        err.contains("region `c::p`: saved tensor `saved.")
            && err.contains("was modified in place after it was saved (version 0, now 1)"),
        "{err}"
    );
    assert!(!err.contains("kept for replay"), "{err}");
}

#[test]
// docs/semantics.md, rule C8.
fn retain_graph_replays_again_and_gives_the_same_gradients() {
    let replays = counter();
    let r = replays.clone();
    let x = input();
    let y = checkpoint("c")
        .call(&x, move |x| {
            let a = region("p", Policy::Save).call(&x, |x| x * 2);
            region("q", Policy::Recompute).call(&a, |a| {
                r.fetch_add(1, Ordering::SeqCst);
                a.sin()
            })
        })
        .sum(Kind::Float);
    backward_with(&y, true).unwrap();
    let g1 = x.grad().copy();
    backward_with(&y, false).unwrap();
    assert_eq!(
        replays.load(Ordering::SeqCst),
        3,
        "forward + one replay per backward"
    );
    assert_bitwise(&x.grad(), &(&g1 * 2), "accumulated gradient");
}

struct Counter(Arc<AtomicU64>);

impl RecomputeStateHook for Counter {
    fn snapshot(&self) -> Box<dyn Any + Send> {
        Box::new(self.0.load(Ordering::SeqCst))
    }
    fn restore(&self, s: &(dyn Any + Send)) {
        self.0
            .store(*s.downcast_ref::<u64>().unwrap(), Ordering::SeqCst);
    }
}

#[test]
// docs/semantics.md, rules H2 and H3.
fn state_hooks_make_replay_draw_what_the_forward_drew() {
    let state = Arc::new(AtomicU64::new(10));
    let draws = Arc::new(Mutex::new(Vec::new()));
    let (s, d) = (state.clone(), draws.clone());
    let x = input();
    let y = checkpoint("c")
        .state_hook(Counter(state.clone()))
        .call(&x, move |x| {
            let draw = |s: &AtomicU64| s.fetch_add(1, Ordering::SeqCst) as f64;
            let a = region("p", Policy::Save).call(&x, |x| x * draw(&s));
            recompute_needs_tensor(&a);
            let k = draw(&s);
            d.lock().unwrap().push(k);
            (a * k).sin()
        });
    let after_forward = state.load(Ordering::SeqCst);
    state.store(100, Ordering::SeqCst);
    let g = grad_of(&x, &y.sum(Kind::Float));
    assert_eq!(
        *draws.lock().unwrap(),
        vec![11.0, 11.0],
        "replay drew after the skipped region's exit state"
    );
    assert_eq!(after_forward, 12);
    assert_eq!(
        state.load(Ordering::SeqCst),
        100,
        "outer state restored after replay"
    );
    let x2 = input();
    assert_bitwise(
        &g,
        &grad_of(&x2, &(&x2 * 10.0 * 11.0).sin().sum(Kind::Float)),
        "gradient",
    );
}

#[test]
// docs/semantics.md, rule C13 (E9).
fn determinism_metadata_catches_a_replay_with_other_shapes() {
    let x = input();
    let y = checkpoint("c")
        .determinism(Determinism::Metadata)
        .call(&x, |x| {
            let h = if is_recomputing() {
                x.narrow(0, 0, 1) * 1.0
            } else {
                x * 1.0
            };
            h.sin().sum(Kind::Float)
        });
    let err = remat::Error::from(y.f_backward().unwrap_err()).to_string();
    assert!(
        err.contains("checkpoint `c`: saved tensor 0 differs between forward and replay"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rule C13 (E10).
fn determinism_bitwise_catches_a_replay_with_other_values() {
    let x = input();
    let calls = counter();
    let y = checkpoint("c")
        .determinism(Determinism::Bitwise)
        .call(&x, move |x| {
            let k = calls.fetch_add(1, Ordering::SeqCst) as f64;
            (x * (1.0 + k)).sin().sum(Kind::Float)
        });
    let err = remat::Error::from(y.f_backward().unwrap_err()).to_string();
    assert!(
        err.contains("saved tensor 0 ([2, 2]) has other values on replay"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rules T3, T6 and K7.
fn offloading_hooks_see_all_three_kinds_with_the_producers_context() {
    use remat::{current_saved_tensor_info, SavedTensorKind, TensorHooks};
    let label = Arc::new(Mutex::new("outside"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (l, s) = (label.clone(), seen.clone());
    // "Offload" to f64 and back: exact for f32 values.
    let hooks = TensorHooks::with_capture(
        move |t: Tensor| {
            let info = current_saved_tensor_info().expect("inside a pack hook");
            let context = info.context.and_then(|c| c.downcast_ref::<&str>().copied());
            s.lock().unwrap().push((info.kind, context));
            t.to_kind(Kind::Double)
        },
        |d: &Tensor| d.to_kind(Kind::Float),
        move || *l.lock().unwrap(),
    );
    let x = input();
    let l = label.clone();
    let y = {
        let _offload = hooks.push();
        checkpoint("c").call(&x, move |x| {
            *l.lock().unwrap() = "producer";
            let a = region("p", Policy::Save).call(&x, |x| (x * 2.0).exp());
            *l.lock().unwrap() = "consumer";
            recompute_needs_tensor(&a);
            a.sin()
        })
    };
    let g = grad_of(&x, &y.sum(Kind::Float));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (SavedTensorKind::CheckpointInput, None),
            (SavedTensorKind::Backward, Some("producer")),
            (SavedTensorKind::SaveOutput, Some("producer")),
        ]
    );
    let x2 = input();
    assert_bitwise(
        &g,
        &grad_of(&x2, &(&x2 * 2.0).exp().sin().sum(Kind::Float)),
        "gradient",
    );
}

/// A Save output kept for replay, and a weak handle to its storage.
fn kept_output(x: &Tensor) -> (Tensor, Arc<Mutex<Option<remat::storage::WeakStorage>>>) {
    let weak = Arc::new(Mutex::new(None));
    let w = weak.clone();
    let y = checkpoint("c").call(x, move |x| {
        let a = region("p", Policy::Save).call(&x, |x| x * 2.0);
        if !is_recomputing() {
            *w.lock().unwrap() = remat::storage::WeakStorage::new(&a);
        }
        recompute_needs_tensor(&a);
        a.sin().sum(Kind::Float)
    });
    (y, weak)
}

#[test]
// docs/semantics.md, rule P3.
fn persisted_values_are_freed_after_backward_unless_the_graph_is_retained() {
    let x = input();
    let (y, weak) = kept_output(&x);
    let alive = || weak.lock().unwrap().as_ref().unwrap().is_alive();
    assert!(alive(), "kept for replay");
    backward_with(&y, true).unwrap();
    assert!(alive(), "retain_graph keeps it for the next backward");
    backward_with(&y, false).unwrap();
    assert!(!alive(), "served and released");
}

/// Whether a kept `Save` output is still alive inside the replay, right
/// after bare code dropped its last handle to it: only remat can hold it
/// then (the add that read it saves nothing).
fn alive_after_serving(retain_graph: bool) -> Option<bool> {
    let alive = Arc::new(Mutex::new(None));
    let seen = alive.clone();
    let x = input();
    let y = checkpoint("c").call(&x, move |x| {
        let a = region("p", Policy::Save).call(&x, |x| x * 2.0);
        recompute_needs_tensor(&a);
        let weak = remat::storage::WeakStorage::new(&a).unwrap();
        let b = &a + 1.0;
        drop(a);
        if is_recomputing() {
            *seen.lock().unwrap() = Some(weak.is_alive());
        }
        b.sin().sum(Kind::Float)
    });
    backward_with(&y, retain_graph).unwrap();
    let result = *alive.lock().unwrap();
    result
}

#[test]
// docs/semantics.md, rule P3.
fn a_served_value_is_released_as_soon_as_it_is_served() {
    // Without `retain_graph` the value is gone the moment replay has it,
    // while backward is still running...
    assert_eq!(alive_after_serving(false), Some(false));
    // ...with it, remat keeps it for the next backward.
    assert_eq!(alive_after_serving(true), Some(true));
}

#[test]
// docs/semantics.md, rule P2 (E12).
fn modifying_a_persisted_output_in_place_errors_at_backward() {
    let x = input();
    let y = checkpoint("c").call(&x, |x| {
        let mut a = region("p", Policy::Save).call(&x, |x| x * 2.0);
        recompute_needs_tensor(&a);
        let b = a.sin();
        let _ = a.g_add_(&Tensor::ones([2, 2], tch::kind::FLOAT_CPU));
        b
    });
    let err = remat::Error::from(y.sum(Kind::Float).f_backward().unwrap_err()).to_string();
    assert!(
        err.contains("region `c::p`: output 0 was modified in place after it was kept for replay"),
        "{err}"
    );
}

#[test]
// docs/semantics.md, rule D1.
fn the_trace_shows_regions_and_scopes_of_the_forward_only() {
    use remat::{diagnostics::collect_trace, diagnostics::trace_scope};
    let x = input();
    let (y, trace) = collect_trace(|| {
        trace_scope("model", || {
            checkpoint("c").call(&x, |x| {
                let a = trace_scope("attn", || {
                    region("attention", Policy::Save).call(&x, |x| x.sin())
                });
                recompute_needs_tensor(&a);
                region("mlp", Policy::Recompute).call(&a, |a| a.cos())
            })
        })
    });
    let expected = "remat trace\n  model\n    attn\n      attention: save\n    mlp: recompute\n";
    assert_eq!(trace.to_string(), expected);
    let ((), after) = collect_trace(|| y.sum(Kind::Float).backward());
    assert!(after.entries.is_empty(), "replay is not traced: {after}");
}

#[test]
// docs/semantics.md, rule K5.
fn returning_a_save_output_from_the_checkpoint_is_fine() {
    let x = input();
    let y = checkpoint("c").call(&x, |x| {
        let h = x.tanh();
        region("out", Policy::Save).call(&h, |h| h * 3.0)
    });
    let g = grad_of(&x, &y.sum(Kind::Float));
    let x2 = input();
    assert_bitwise(
        &g,
        &grad_of(&x2, &(x2.tanh() * 3.0).sum(Kind::Float)),
        "gradient",
    );
}

#[test]
// docs/semantics.md, rule C11.
fn an_error_on_the_forward_leaves_the_thread_clean() {
    let x = input();
    let err = checkpoint("c")
        .try_call(&x, |x| {
            let a = region("r", Policy::Save).call(&x, |x| x.sin());
            region("r", Policy::Save).call(&a, |a| a.cos())
        })
        .unwrap_err();
    assert!(err.to_string().contains("used twice"), "{err}");
    assert!(!is_recomputing());
    // Saves are plain again: a region outside a checkpoint is a plain call.
    let y = region("r", Policy::Save).call(&x, |x| x.sin());
    assert_bitwise(
        &grad_of(&x, &y.sum(Kind::Float)),
        &tch::no_grad(|| x.cos()),
        "plain gradient",
    );
}

#[test]
// docs/semantics.md, rule C16 (E19).
fn a_backward_inside_the_closure_through_its_own_saves_is_an_error_not_a_deadlock() {
    let x = input();
    let err = checkpoint("c")
        .try_call(&x, |x| {
            let h = x.sin();
            // Reaches a holder of this very checkpoint while it runs.
            let g = Tensor::f_run_backward(&[h.sum(Kind::Float)], &[&x], true, false);
            let message = remat::Error::from(g.unwrap_err()).to_string();
            assert!(
                message.contains("while its closure was still running"),
                "{message}"
            );
            h
        })
        .map(|_| ());
    assert!(err.is_ok(), "{err:?}");
}

#[test]
// docs/semantics.md, rule S1: a Save region keeps sparse saves too (a
// layout without a dense storage), and the gradients are the plain model's.
fn a_save_region_keeps_sparse_saves() {
    let body = |x: &Tensor| {
        let s = (x * 2.0).to_sparse_sparse_dim(1);
        (&s * &s).to_dense(None, false).sum(Kind::Float)
    };
    let x = input();
    let y = checkpoint("c").call(&x, move |x| region("sp", Policy::Save).call(&x, body));
    let plain = grad_of(&x, &body(&x));
    assert_bitwise(&grad_of(&x, &y), &plain, "sparse saves");
}
