//! Module state under replay with tch's own (not replay-aware) batch norm:
//! `BufferStateHook` restores its running statistics around replay, and
//! those restores never trip the in-place check of a `save` region, which
//! still refuses a real modification.

use crate::common::assert_bitwise;
use remat::autograd::GeneratorLock;
use remat::nn::ModuleT;
use remat::{checkpoint, region, BufferStateHook, Policy, Shared};
use tch::{nn, Kind, Tensor};

fn setup() -> (
    nn::VarStore,
    Shared<nn::Conv2D>,
    Shared<nn::BatchNorm>,
    Tensor,
) {
    tch::manual_seed(3);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let conv = nn::conv2d(vs.root() / "conv1", 2, 2, 3, Default::default());
    let bn = nn::batch_norm2d(vs.root() / "bn1", 2, Default::default());
    let x = Tensor::randn([4, 2, 5, 5], tch::kind::FLOAT_CPU);
    (vs, Shared::new(conv), Shared::new(bn), x)
}

/// conv + bn in a region of policy `policy`, then more bare code.
fn step(policy: Option<Policy>) -> (Tensor, Tensor, Tensor) {
    let (vs, conv, bn, x) = setup();
    let body = {
        let (conv, bn) = (conv.clone(), bn.clone());
        move |x: Tensor| {
            let (conv, bn) = (conv.clone(), bn.clone());
            let stem = move |x: &Tensor| bn.forward_t(&conv.forward_t(x, true), true);
            let h = match policy {
                Some(p) => region("pre", p).call(&x, stem),
                None => stem(&x),
            };
            remat::recompute_needs_tensor(&h);
            h.relu().sum(Kind::Float)
        }
    };
    let loss = match policy {
        None => body(x),
        Some(_) => checkpoint("layer2")
            .state_hook(BufferStateHook::from_var_store(&vs, "bn1"))
            .call(&x, body),
    };
    loss.backward();
    let b = bn.lock();
    let grad = conv.lock().ws.grad().copy();
    (grad, b.running_mean.copy(), b.running_var.copy())
}

#[test]
// docs/semantics.md, rules H4 and H6.
fn buffer_hook_restores_do_not_trip_the_in_place_check_under_any_policy() {
    let _rng = GeneratorLock::acquire();
    tch::set_num_threads(1);
    let (grad, mean, var) = step(None);
    for policy in [Policy::Save, Policy::Recompute] {
        // Before the fix: "saved tensor `saved.3` was modified in place".
        let (g, m, v) = step(Some(policy));
        assert_bitwise(&g, &grad, &format!("{policy:?}: conv gradient"));
        assert_bitwise(&m, &mean, &format!("{policy:?}: running mean"));
        assert_bitwise(&v, &var, &format!("{policy:?}: running var"));
    }
}

#[test]
// The control for docs/semantics.md, rule H6.
fn without_the_hook_tch_batch_norm_updates_twice_when_replayed() {
    let _rng = GeneratorLock::acquire();
    let (_, _, mean) = {
        let (vs, conv, bn, x) = setup();
        drop(vs);
        let (c, b) = (conv.clone(), bn.clone());
        let y = checkpoint("layer2").call(&x, move |x| {
            b.forward_t(&c.forward_t(&x, true), true).sum(Kind::Float)
        });
        let once = bn.lock().running_mean.copy();
        y.backward();
        let twice = bn.lock().running_mean.copy();
        (
            once.shallow_clone(),
            twice.shallow_clone(),
            !once.equal(&twice),
        )
    };
    assert!(mean, "replay was expected to update the running mean again");
}

#[test]
// docs/semantics.md, rule S2, after H4.
fn a_real_in_place_modification_after_saving_is_still_refused() {
    let _rng = GeneratorLock::acquire();
    let mut w = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
    let x = Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
    let hook = BufferStateHook::new([("w", &w)]);
    let owned = w.shallow_clone();
    let y = checkpoint("c").state_hook(hook).call(&x, move |x| {
        let h = region("scale", Policy::Save).call(&x, |x| x * &owned);
        remat::recompute_needs_tensor(&h);
        h.sin().sum(Kind::Float)
    });
    let _ = tch::no_grad(|| w.f_add_scalar_(1.0)); // the user's own write
    let err = y.f_backward().unwrap_err().to_string();
    assert!(
        err.contains("region `c::scale`: saved tensor `saved.0` was modified in place"),
        "{err}"
    );
}
