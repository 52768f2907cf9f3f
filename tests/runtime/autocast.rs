//! Mixed precision (docs/semantics.md, rules A1-A6): `remat::autocast` has
//! torch.autocast's semantics, and a checkpoint recomputes under the
//! autocast state of its forward, whatever state backward is called under,
//! so gradients under CPU bf16 autocast equal the model without checkpoints
//! bit for bit.

use crate::common::{assert_bitwise, assert_same_run, message, Run};
use remat::{
    autocast, checkpoint, is_recomputing, recompute_needs_tensor, region, AutocastGuard,
    Determinism, Policy,
};
use remat_reference::model::{batch, Model, ModelPolicy, POLICIES, SMALL};
use std::panic::{catch_unwind, AssertUnwindSafe};
use tch::{kind::FLOAT_CPU, Device, Kind, Tensor};

const CPU: Device = Device::Cpu;
const BF16: Kind = Kind::BFloat16;

/// Where backward is called from.
#[derive(Clone, Copy, Debug)]
enum Backward {
    /// After leaving autocast (what training loops do).
    Outside,
    /// Still inside the autocast scope of the forward.
    Inside,
}

/// Loss and every parameter's gradient of `loss` run under bf16 autocast.
fn under_bf16(model: &Model, backward: Backward, loss: impl Fn() -> Tensor) -> Run {
    model.zero_grad();
    let loss = match backward {
        Backward::Outside => {
            let loss = autocast(CPU, BF16, &loss);
            loss.backward();
            loss
        }
        Backward::Inside => autocast(CPU, BF16, || {
            let loss = loss();
            loss.backward();
            loss
        }),
    };
    assert_eq!(AutocastGuard::current(CPU), None, "autocast left on");
    Run::of(&loss, model.named_parameters())
}

/// Rule A2 on the reference model: every policy, written with the runtime
/// API and with the macros, backward called outside autocast and inside it.
#[test]
fn every_policy_under_bf16_autocast_matches_the_model_without_checkpoints() {
    tch::set_num_threads(1);
    let model = Model::new(SMALL, 0);
    let (tokens, targets) = batch(SMALL, 3);
    for backward in [Backward::Outside, Backward::Inside] {
        let plain = under_bf16(&model, backward, || {
            model.loss_api(&tokens, &targets, ModelPolicy::None)
        });
        // Autocast really changed the numbers: fp32 gives another loss.
        let fp32 = model
            .loss_api(&tokens, &targets, ModelPolicy::None)
            .detach();
        assert!(
            !fp32.equal(&plain.loss.to_kind(fp32.kind())),
            "autocast had no effect"
        );
        for policy in POLICIES {
            let api = under_bf16(&model, backward, || {
                model.loss_api(&tokens, &targets, policy)
            });
            assert_same_run(
                &api,
                &plain,
                &format!("{policy:?}, runtime API, {backward:?}"),
            );
            let macros = under_bf16(&model, backward, || {
                remat_reference::macros::loss(&model, &tokens, &targets, policy)
            });
            assert_same_run(
                &macros,
                &plain,
                &format!("{policy:?}, macros, {backward:?}"),
            );
        }
    }
}

/// Without the restore the same checkpoint fails in backward: the replayed
/// linear would compute in fp32 against the forward's bf16 saves. This pins
/// that the test above tests what it names.
#[test]
fn the_forward_really_ran_in_bf16() {
    let w = Tensor::randn([8, 8], FLOAT_CPU).set_requires_grad(true);
    let x = Tensor::randn([4, 8], FLOAT_CPU).set_requires_grad(true);
    let w2 = w.shallow_clone();
    let y = autocast(CPU, BF16, || {
        checkpoint("blk").call(&x, move |x| {
            let h = x.linear::<Tensor>(&w2, None);
            assert_eq!(h.kind(), BF16, "the body runs under autocast on both runs");
            h.relu().linear::<Tensor>(&w2, None)
        })
    });
    assert_eq!(y.kind(), BF16);
    y.to_kind(Kind::Float).sum(Kind::Float).backward();
    assert_eq!(w.grad().kind(), Kind::Float);
}

/// A small two-layer block for the nested cases.
fn block(w1: &Tensor, w2: &Tensor, x: &Tensor) -> Tensor {
    x.linear::<Tensor>(w1, None)
        .gelu("none")
        .linear::<Tensor>(w2, None)
}

struct Nested {
    w1: Tensor,
    w2: Tensor,
    x: Tensor,
}

impl Nested {
    fn new() -> Nested {
        tch::manual_seed(11);
        Nested {
            w1: Tensor::randn([16, 8], FLOAT_CPU).set_requires_grad(true),
            w2: Tensor::randn([8, 16], FLOAT_CPU).set_requires_grad(true),
            x: Tensor::randn([4, 8], FLOAT_CPU).set_requires_grad(true),
        }
    }

    /// Gradients of x, w1 and w2 of `f`'s output, backward outside autocast.
    fn grads(&self, f: impl FnOnce(&Tensor, Tensor, Tensor) -> Tensor) -> Vec<Tensor> {
        for t in [&self.x, &self.w1, &self.w2] {
            let _ = t.grad().f_zero_();
        }
        let y = f(&self.x, self.w1.shallow_clone(), self.w2.shallow_clone());
        y.to_kind(Kind::Float).square().sum(Kind::Float).backward();
        assert_eq!(AutocastGuard::current(CPU), None);
        [&self.x, &self.w1, &self.w2]
            .iter()
            .map(|t| t.grad().copy())
            .collect()
    }
}

fn assert_grads(got: &[Tensor], want: &[Tensor], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_bitwise(g, w, &format!("{what}: gradient {i}"));
    }
}

/// Rule A2 in the shapes model code has: nested checkpoints, a `Save`
/// region (skipped during recomputation) inside a checkpoint nested in
/// another, a checkpoint started outside autocast whose body enters it, and
/// an autocast-off island inside an autocast checkpoint.
#[test]
fn nested_checkpoints_save_regions_and_islands_recompute_as_their_forward_ran() {
    let n = Nested::new();
    let plain = n.grads(|x, w1, w2| autocast(CPU, BF16, || block(&w1, &w2, x)));

    let nested = n.grads(|x, w1, w2| {
        autocast(CPU, BF16, || {
            checkpoint("outer").call(x, move |x| {
                let (w1, w2) = (w1.shallow_clone(), w2.shallow_clone());
                checkpoint("inner").call(&x, move |x| block(&w1, &w2, &x))
            })
        })
    });
    assert_grads(&nested, &plain, "nested checkpoints");

    let save = n.grads(|x, w1, w2| {
        autocast(CPU, BF16, || {
            checkpoint("outer").call(x, move |x| {
                let (w1, w2) = (w1.shallow_clone(), w2.shallow_clone());
                checkpoint("inner").call(&x, move |x| {
                    let h = region("up", Policy::Save)
                        .call(&x, |x| x.linear::<Tensor>(&w1, None).gelu("none"));
                    region("down", Policy::Recompute).call(&h, |h| h.linear::<Tensor>(&w2, None))
                })
            })
        })
    });
    assert_grads(&save, &plain, "a Save region inside nested checkpoints");

    let entered_inside = n.grads(|x, w1, w2| {
        checkpoint("outside").call(x, move |x| autocast(CPU, BF16, || block(&w1, &w2, &x)))
    });
    assert_grads(
        &entered_inside,
        &plain,
        "a body that enters autocast itself",
    );

    let plain_island = n.grads(|x, w1, w2| {
        autocast(CPU, BF16, || {
            let h = x.linear::<Tensor>(&w1, None);
            let _off = AutocastGuard::enter(CPU, None, false, None).unwrap();
            h.to_kind(Kind::Float)
                .gelu("none")
                .linear::<Tensor>(&w2, None)
        })
    });
    let island = n.grads(|x, w1, w2| {
        autocast(CPU, BF16, || {
            checkpoint("island").call(x, move |x| {
                let h = x.linear::<Tensor>(&w1, None);
                let _off = AutocastGuard::enter(CPU, None, false, None).unwrap();
                let out = h
                    .to_kind(Kind::Float)
                    .gelu("none")
                    .linear::<Tensor>(&w2, None);
                assert_eq!(out.kind(), Kind::Float, "the island computes in fp32");
                out
            })
        })
    });
    assert_grads(&island, &plain_island, "an autocast-off island");
}

/// A `needs` marked Save output read by bare code, under autocast: the
/// served value is the forward's bf16 tensor.
#[test]
fn a_served_save_output_keeps_its_bf16_dtype() {
    let n = Nested::new();
    let plain = n.grads(|x, w1, w2| autocast(CPU, BF16, || block(&w1, &w2, x)));
    let served = n.grads(|x, w1, w2| {
        autocast(CPU, BF16, || {
            checkpoint("served").call(x, move |x| {
                let h = region("up", Policy::Save).call(&x, |x| x.linear::<Tensor>(&w1, None));
                recompute_needs_tensor(&h);
                assert_eq!(h.kind(), BF16);
                h.gelu("none").linear::<Tensor>(&w2, None)
            })
        })
    });
    assert_grads(&served, &plain, "a served Save output");
}

/// Rule A2's exit paths: a panic and an error inside a recomputation under
/// autocast leave the caller's autocast state (dtype and cache flag) as it
/// was, and the error says how the two states differed.
#[test]
fn a_panic_or_error_during_recomputation_leaves_the_autocast_state_as_it_was() {
    let w = Tensor::randn([8, 8], FLOAT_CPU).set_requires_grad(true);
    let x = Tensor::randn([4, 8], FLOAT_CPU).set_requires_grad(true);
    let cache = AutocastGuard::cache_enabled();

    let w1 = w.shallow_clone();
    let during = std::sync::Arc::new(std::sync::Mutex::new(None));
    let d = during.clone();
    let y = autocast(CPU, BF16, || {
        checkpoint("panics").call(&x, move |x| {
            if is_recomputing() {
                *d.lock().unwrap() = Some(AutocastGuard::current(CPU));
                panic!("boom during recomputation");
            }
            x.linear::<Tensor>(&w1, None).relu()
        })
    });
    // Backward from inside a different autocast state (fp16), to see that
    // it is this state that comes back.
    let err = autocast(CPU, Kind::Half, || {
        let err = y
            .to_kind(Kind::Float)
            .sum(Kind::Float)
            .f_backward()
            .unwrap_err()
            .to_string();
        assert_eq!(AutocastGuard::current(CPU), Some(Kind::Half));
        err
    });
    assert!(err.contains("boom during recomputation"), "{err}");
    assert_eq!(
        *during.lock().unwrap(),
        Some(Some(BF16)),
        "recomputed under the forward's state"
    );
    assert_eq!(AutocastGuard::current(CPU), None);
    assert_eq!(AutocastGuard::cache_enabled(), cache);

    // A closure whose recomputation computes in another dtype than its
    // forward: libtorch's own dtype error, with the autocast states named.
    // (Without early stop: the failing matmul saves both its operands
    // before it computes, so an early stop would end the replay there,
    // rule C17, and only the metadata check would speak.)
    let note = "the forward ran with autocast on for cpu (BFloat16), the backward that \
                recomputes it was called with autocast off";
    let recompute_in = |kind: Kind, back_to_float: bool| {
        let w2 = w.shallow_clone();
        let y = autocast(CPU, BF16, || {
            checkpoint("casts")
                .determinism(Determinism::Metadata)
                .early_stop(false)
                .call(&x, move |x| {
                    let mut x = if is_recomputing() { x.to_kind(kind) } else { x };
                    x = x.relu();
                    if back_to_float {
                        x = x.to_kind(Kind::Float);
                    }
                    x.linear::<Tensor>(&w2, None)
                })
        });
        let err = y
            .to_kind(Kind::Float)
            .sum(Kind::Float)
            .f_backward()
            .unwrap_err()
            .to_string();
        assert_eq!(AutocastGuard::current(CPU), None);
        assert!(
            err.contains("checkpoint `casts`") && err.contains(note),
            "{err}"
        );
        err
    };
    let err = recompute_in(Kind::Double, false);
    assert!(
        err.contains("expected m1 and m2 to have the same dtype"),
        "{err}"
    );
    // The metadata check: relu's saved output is double during recomputation.
    let err = recompute_in(Kind::Double, true);
    assert!(
        err.contains("saved tensor 0 differs between forward and replay")
            && err.contains("(dtype differs: Float on the forward, Double now)"),
        "{err}"
    );
}

/// `remat::autocast` nests as torch.autocast does and restores on panics.
#[test]
fn autocast_scopes_nest_and_restore() {
    assert_eq!(AutocastGuard::current(CPU), None);
    autocast(CPU, BF16, || {
        assert_eq!(AutocastGuard::current(CPU), Some(BF16));
        autocast(CPU, Kind::Half, || {
            assert_eq!(AutocastGuard::current(CPU), Some(Kind::Half))
        });
        assert_eq!(AutocastGuard::current(CPU), Some(BF16));
        let off = AutocastGuard::enter(CPU, None, false, None).unwrap();
        assert_eq!(AutocastGuard::current(CPU), None);
        drop(off);
        assert_eq!(AutocastGuard::current(CPU), Some(BF16));
    });
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        autocast(CPU, BF16, || panic!("inside autocast"))
    }));
    assert_eq!(message(panicked), "inside autocast");
    assert_eq!(AutocastGuard::current(CPU), None);
    let err = AutocastGuard::new(CPU, Kind::Float)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("autocast on Cpu runs in BFloat16 or Half, not Float"),
        "{err}"
    );
    let err = AutocastGuard::new(Device::Vulkan, BF16)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no autocast for Vulkan"), "{err}");
}
