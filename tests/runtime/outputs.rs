//! A checkpoint's outputs are the tensors its closure computed, in each
//! other's graph as the closure built them (docs/semantics.md, rule C9):
//! gradients of one output with respect to another, an output returned twice
//! and outputs that are views of each other, bitwise as without checkpoints.

use crate::common::assert_bitwise;
use crate::ways::{values, Way, WAYS};
use remat::{checkpoint, region, Policy};
use tch::{Kind, Tensor};

fn weight() -> Tensor {
    values(36, 0.5).view([6, 6]).set_requires_grad(true)
}

/// `body` on `x`, plainly or as a checkpoint made the `way` way; the middle
/// value `h = tanh(x w)` goes through a region when `way` says so.
fn run(way: Way, x: &Tensor, w: &Tensor, body: fn(Tensor) -> Vec<Tensor>) -> Vec<Tensor> {
    let w = w.shallow_clone();
    let middle = move |x: &Tensor| x.matmul(&w).tanh();
    match way {
        Way::Plain => body(middle(x)),
        Way::Bare { early_stop } => checkpoint("c")
            .early_stop(early_stop)
            .call(x, move |x| body(middle(&x))),
        Way::Region(policy) => checkpoint("c").call(x, move |x| {
            let h = region("h", policy).call_saved(&x, &middle);
            body(remat::needs(h))
        }),
    }
}

fn input() -> Tensor {
    values(24, 2.0).view([4, 6]).set_requires_grad(true)
}

#[test]
// Rule C9: `z = f(y)` is in `y`'s graph, so d(sum z)/dy is defined and is
// what the model without checkpoints gives (what a `retain_grad` on `y`
// would see of `z`).
fn the_gradient_of_one_output_with_respect_to_another_is_torchs() {
    let (x, w) = (input(), weight());
    let grad_of = |way| {
        let out = run(way, &x, &w, |h| {
            let z = h.sin() * 3.0;
            vec![h, z]
        });
        let loss = (&out[0] * &out[0]).sum(Kind::Float) + out[1].sum(Kind::Float);
        let only_z = out[1].sum(Kind::Float);
        let dz = Tensor::run_backward(&[&only_z], &[&out[0]], true, false);
        let dloss = Tensor::run_backward(&[&loss], &[&out[0]], false, false);
        (
            dz.into_iter().next().unwrap(),
            dloss.into_iter().next().unwrap(),
        )
    };
    let (dz0, dloss0) = grad_of(Way::Plain);
    for way in WAYS {
        let (dz, dloss) = grad_of(way);
        assert!(dz.defined(), "{way:?}: dz/dy is undefined");
        assert_bitwise(&dz, &dz0, &format!("{way:?}: dz/dy"));
        assert_bitwise(&dloss, &dloss0, &format!("{way:?}: dloss/dy"));
    }
}

/// Every weight and input gradient of `loss(outputs)` made the `way` way.
fn gradients(
    way: Way,
    body: fn(Tensor) -> Vec<Tensor>,
    loss: fn(&[Tensor]) -> Tensor,
) -> (Tensor, Tensor) {
    let (x, w) = (input(), weight());
    let out = run(way, &x, &w, body);
    loss(&out).backward();
    (x.grad(), w.grad())
}

fn check_bitwise(body: fn(Tensor) -> Vec<Tensor>, loss: fn(&[Tensor]) -> Tensor, what: &str) {
    let (gx0, gw0) = gradients(Way::Plain, body, loss);
    for way in WAYS {
        let (gx, gw) = gradients(way, body, loss);
        assert_bitwise(&gx, &gx0, &format!("{what}, {way:?}: input gradient"));
        assert_bitwise(&gw, &gw0, &format!("{what}, {way:?}: weight gradient"));
    }
}

#[test]
// Rule C9: one tensor returned twice is one tensor: the gradients reaching
// both copies meet in the closure's graph in the order they would without
// checkpoints (a UNet's down block returns its output and a list of skip
// states ending with it).
fn one_tensor_returned_twice_gives_the_gradients_of_the_model_without_checkpoints() {
    check_bitwise(
        |h| {
            let y = h.sin();
            vec![y.shallow_clone(), y]
        },
        |o| {
            (&o[0] * 0.3).sum(Kind::Float)
                + (&o[1] * &o[1]).sum(Kind::Float)
                + (&o[0] * &o[1]).exp().sum(Kind::Float)
        },
        "returned twice",
    );
}

#[test]
// Rule C9: outputs that are views of one another keep their view relation.
fn outputs_that_are_views_of_each_other_give_the_gradients_of_the_model_without_checkpoints() {
    check_bitwise(
        |h| {
            let y = h.cos();
            let t = y.transpose(0, 1);
            let n = y.narrow(1, 2, 3);
            vec![y, t, n]
        },
        |o| {
            o[0].pow_tensor_scalar(2).sum(Kind::Float)
                + o[1].matmul(&o[0]).sum(Kind::Float)
                + o[2].exp().sum(Kind::Float)
        },
        "views",
    );
}

#[test]
// Rule C9: an input returned unchanged is the input, so every new graph
// built on it backpropagates without `retain_graph`.
fn an_input_returned_unchanged_backpropagates_again_without_retain_graph() {
    let x = input();
    let (same, y) = checkpoint("c").call(&x, |x| {
        let y = x.sin();
        (x, y)
    });
    (&same * 2.0).sum(Kind::Float).backward();
    (&same * 3.0).sum(Kind::Float).backward();
    y.sum(Kind::Float).backward();
    let expected = Tensor::full([4, 6], 5.0, tch::kind::FLOAT_CPU) + x.cos();
    assert_bitwise(&x.grad(), &expected, "input gradient");
}

/// A UNet down block's shape: the output and the list of skip states, whose
/// last element is that output.
fn down_block(h: Tensor) -> (Tensor, Vec<Tensor>) {
    let a = h.sin();
    let b = (&a * 2.0).tanh();
    (b.shallow_clone(), vec![a, b])
}

fn down_loss(out: (Tensor, Vec<Tensor>)) -> Tensor {
    let (h, skips) = out;
    (&h * &skips[0]).sum(Kind::Float) + skips[1].exp().sum(Kind::Float) + h.sum(Kind::Float)
}

#[test]
// Rule C10: a checkpoint returns `(Tensor, Vec<Tensor>)`, nested as the
// closure built it, with the gradients of the model without checkpoints;
// a region returning it is served with its lengths on replay (R7).
fn nested_outputs_keep_their_shape_and_the_plain_gradients() {
    let run = |way: &str| {
        let x = input();
        let out = match way {
            "plain" => down_block(x.shallow_clone()),
            "checkpoint" => checkpoint("down").call(&x, down_block),
            "save region" => checkpoint("down").call(&x, |x| {
                let (h, skips) = remat::needs(
                    region("block", Policy::Save).call_saved(&x, |x| down_block(x.shallow_clone())),
                );
                (
                    h.cos(),
                    skips.into_iter().map(|s| s * 3.0).collect::<Vec<_>>(),
                )
            }),
            _ => {
                let (h, skips) = down_block(x.shallow_clone());
                (h.cos(), skips.into_iter().map(|s| s * 3.0).collect())
            }
        };
        assert_eq!(out.1.len(), 2, "{way}: the skip list's length");
        down_loss(out).backward();
        x.grad()
    };
    assert_bitwise(&run("checkpoint"), &run("plain"), "checkpoint");
    assert_bitwise(
        &run("save region"),
        &run("plain with a tail"),
        "save region",
    );
}
