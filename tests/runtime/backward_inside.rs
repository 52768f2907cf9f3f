//! Gradients computed inside a checkpointed closure (docs/semantics.md,
//! rule C16): a gradient penalty taken with `create_graph` inside the
//! closure, differentiated again by the outer backward, under every way a
//! checkpoint can keep or drop its values, bitwise as without checkpoints.

use crate::common::{assert_bitwise, penalised};
use crate::ways::{values, Way, WAYS};
use remat::{checkpoint, region, storage::WeakStorage};
use std::sync::{Arc, Mutex};
use tch::{Kind, Tensor};

/// The outer backward's gradients of the input and the weight.
fn gradients(way: Way) -> (Tensor, Tensor) {
    let x = values(12, 0.2).view([3, 4]).set_requires_grad(true);
    let w = values(16, 1.1).view([4, 4]).set_requires_grad(true);
    let wc = w.shallow_clone();
    let middle = move |x: &Tensor| x.matmul(&wc).tanh();
    let loss = match way {
        Way::Plain => penalised(&x, middle(&x)),
        Way::Bare { early_stop } => checkpoint("c")
            .backward_inside(true)
            .early_stop(early_stop)
            .call(&x, move |x| penalised(&x, middle(&x))),
        Way::Region(policy) => checkpoint("c").backward_inside(true).call(&x, move |x| {
            let h = region("h", policy).call_saved(&x, &middle);
            penalised(&x, remat::needs(h))
        }),
    };
    loss.backward();
    (x.grad(), w.grad())
}

#[test]
// Rule C16: second-order gradients through a gradient taken inside the
// closure are the model's without checkpoints, bit for bit.
fn a_gradient_penalty_inside_a_checkpoint_gives_the_second_order_gradients_of_the_plain_model() {
    let (gx0, gw0) = gradients(Way::Plain);
    for way in WAYS {
        let (gx, gw) = gradients(way);
        assert_bitwise(&gx, &gx0, &format!("{way:?}: input gradient"));
        assert_bitwise(&gw, &gw0, &format!("{way:?}: weight gradient"));
    }
}

#[test]
// Rule C16: a backward inside the outer closure that only reaches a
// checkpoint nested in it recomputes that one, reading the outer's values.
fn a_backward_inside_reaching_only_a_nested_checkpoint_works() {
    let run = |nested: bool| {
        let x = values(8, 0.7).view([2, 4]).set_requires_grad(true);
        let body = move |x: Tensor, nested: bool| {
            let h = x.sin();
            let inner = if nested {
                checkpoint("inner").call(&h, |h| h.exp() * h.cos())
            } else {
                h.exp() * h.cos()
            };
            let y = inner.sum(Kind::Float);
            let g = Tensor::run_backward(&[&y], &[&x], true, true).remove(0);
            (g * &inner).sum(Kind::Float)
        };
        let loss = if nested {
            checkpoint("outer")
                .backward_inside(true)
                .call(&x, move |x| body(x, true))
        } else {
            body(x.shallow_clone(), false)
        };
        loss.backward();
        x.grad()
    };
    assert_bitwise(&run(true), &run(false), "input gradient");
}

#[test]
// Rule C16 (E19): without the option, the backward inside fails with a
// message that names it.
fn without_the_option_a_backward_inside_is_an_error_naming_it() {
    let x = values(4, 0.3).set_requires_grad(true);
    let err = checkpoint("penalty")
        .try_call(&x, |x| {
            let y = x.tanh().sum(Kind::Float);
            let mut g = Tensor::f_run_backward(&[&y], &[&x], true, true)
                .map_err(|e| e.to_string())
                .unwrap_or_else(|e| panic!("{e}"));
            g.remove(0).sum(Kind::Float)
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("checkpoint `penalty`")
            && err.contains("a backward inside the closure")
            && err.contains(".backward_inside(true)"),
        "{err}"
    );
}

#[test]
// Rule C16: the forward's values are kept until the closure returns, not
// after: an intermediate is dead once the call returned, seen through its
// storage.
fn the_values_kept_for_a_backward_inside_are_freed_when_the_closure_returns() {
    let seen: Arc<Mutex<Vec<WeakStorage>>> = Arc::default();
    let s = seen.clone();
    let x = values(12, 0.9).view([3, 4]).set_requires_grad(true);
    let y = checkpoint("c").backward_inside(true).call(&x, move |x| {
        let h = x.sin(); // saves x (an input) ...
        let t = h.tanh(); // ... and `t`, an intermediate it would otherwise keep
        if !remat::is_recomputing() {
            s.lock().unwrap().push(WeakStorage::new(&t).unwrap());
        }
        let y = (&t * 2.0).sum(Kind::Float);
        let g = Tensor::run_backward(&[&y], &[&x], true, true).remove(0);
        g.sum(Kind::Float)
    });
    assert!(
        !seen.lock().unwrap()[0].is_alive(),
        "the forward's value of `tanh` outlived the closure"
    );
    y.backward();
    let x0 = x.detach().set_requires_grad(true);
    let y0 = (x0.sin().tanh() * 2.0).sum(Kind::Float);
    let g0 = Tensor::run_backward(&[&y0], &[&x0], true, true).remove(0);
    g0.sum(Kind::Float).backward();
    assert_bitwise(&x.grad(), &x0.grad(), "input gradient");
}
