//! An adversarial round against the kept random state (docs/semantics.md,
//! rule C14): programs a torch user writes that could trip it. Each valid
//! one gives the plain gradients bit for bit with every default.

use remat::autograd::{backward_with, rng_state, GeneratorLock};
use remat::{checkpoint, recompute_needs_tensor, region, Determinism, Policy};
use remat_reference::testing::assert_bitwise;
use tch::{Device, Kind, Tensor};

fn input() -> Tensor {
    Tensor::linspace(-1.0, 1.0, 64, (Kind::Float, Device::Cpu))
        .reshape([8, 8])
        .set_requires_grad(true)
}

/// The gradient of `body` in checkpoint `c` (`on`) or plainly, from seed 9,
/// with `backwards` backward passes through a retained graph and a draw of
/// the caller's between them.
fn gradient(body: fn(Tensor) -> Tensor, on: bool, backwards: usize) -> Tensor {
    let x = input();
    tch::manual_seed(9);
    let y = checkpoint("c").enabled(on).call(&x, body).sum(Kind::Float);
    for _ in 0..backwards {
        let _ = Tensor::rand([3], (Kind::Float, Device::Cpu)); // the caller draws
        backward_with(&y, backwards > 1).unwrap();
    }
    x.grad().copy()
}

fn same_as_plain(what: &str, body: fn(Tensor) -> Tensor) {
    for backwards in [1, 2] {
        let plain = gradient(body, false, backwards);
        let remat = gradient(body, true, backwards);
        assert_bitwise(&remat, &plain, &format!("{what}, {backwards} backward(s)"));
    }
}

#[test]
// A closure that seeds the generator itself: recomputation seeds it again.
fn a_closure_that_seeds_the_generator() {
    let _rng = GeneratorLock::acquire();
    same_as_plain("manual_seed inside", |x| {
        tch::manual_seed(42);
        x.dropout(0.5, true).sin() * &x
    });
}

#[test]
// rule O1: an `Offload` region is a `save` region: its draws are jumped
// over as a skipped `save` region's are.
fn a_drawing_offload_region() {
    let _rng = GeneratorLock::acquire();
    same_as_plain("offload region that draws", |x| {
        let h = region("off", Policy::OFFLOAD).call(&x, |x| x.dropout(0.5, true).exp());
        recompute_needs_tensor(&h);
        h.dropout(0.5, true).sin() * &x
    });
}

#[test]
// rule R4: a `save` region nested in a `recompute` region draws; the
// recompute region runs again around it.
fn a_drawing_save_region_inside_a_recompute_region() {
    let _rng = GeneratorLock::acquire();
    same_as_plain("save in recompute", |x| {
        region("outer", Policy::Recompute).call(&x, |x| {
            let h = region("inner", Policy::Save).call(x, |x| x.dropout(0.5, true).exp());
            recompute_needs_tensor(&h);
            h.dropout(0.5, true).sin() * x
        })
    });
}

#[test]
// rule C16: a closure that computes gradients itself reruns its `save`
// regions' bodies on recomputation, drawing again what they drew.
fn a_drawing_save_region_with_a_backward_inside() {
    let _rng = GeneratorLock::acquire();
    let run = |on: bool| {
        let x = input();
        tch::manual_seed(9);
        let y = checkpoint("c")
            .enabled(on)
            .backward_inside(true)
            .call(&x, |x| {
                let h = region("s", Policy::Save).call(&x, |x| x.dropout(0.5, true).tanh());
                recompute_needs_tensor(&h);
                let y = (&h * &h).sum(Kind::Float);
                let g = Tensor::run_backward(&[&y], &[&x], true, true).remove(0);
                (g.square().sum(Kind::Float) + h.dropout(0.5, true).sum(Kind::Float)) * 1.0
            });
        y.backward();
        x.grad().copy()
    };
    let plain = run(false);
    assert_bitwise(&run(true), &plain, "backward inside");
}

#[test]
// rule C13: `Determinism::Bitwise` compares every refilled save with the
// forward's: dropout's masks now pass it.
fn bitwise_determinism_accepts_dropout() {
    let _rng = GeneratorLock::acquire();
    let x = input();
    let y = checkpoint("c")
        .determinism(Determinism::Bitwise)
        .call(&x, |x| x.dropout(0.5, true).sin() * &x);
    backward_with(&y.sum(Kind::Float), false).expect("the same masks on recomputation");
}

#[test]
// Two chains recompute in the reverse of their forwards' order; the
// caller's stream is as before after each backward.
fn checkpoints_recompute_out_of_order_and_put_the_stream_back() {
    let _rng = GeneratorLock::acquire();
    let run = |on: bool| {
        let x = input();
        tch::manual_seed(9);
        let a = checkpoint("a")
            .enabled(on)
            .call(&x, |x| x.dropout(0.5, true).sin());
        let b = checkpoint("b")
            .enabled(on)
            .call(&x, |x| x.dropout(0.5, true).cos());
        let before = rng_state(Device::Cpu).unwrap();
        (b.sum(Kind::Float) * 2.0).backward();
        (a.sum(Kind::Float) * 3.0).backward();
        assert!(rng_state(Device::Cpu).unwrap().equal(&before));
        x.grad().copy()
    };
    let plain = run(false);
    assert_bitwise(&run(true), &plain, "out of order");
}
