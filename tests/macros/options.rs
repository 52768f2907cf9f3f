//! `#[checkpoint]` options against the runtime: `early_stop = EXPR`
//! switches early stop per checkpoint (docs/dsl.md, I1; docs/semantics.md,
//! rules C17 and C18), and `backward_inside = EXPR` lets the body compute
//! gradients itself (rule C16).

use crate::common::assert_bitwise;
use remat::autograd::is_placeholder;
use remat::checkpoint;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use tch::{Kind, Tensor};

/// `sin` saves its input and is the last save; the two ops after it save
/// nothing and count the runs in which they computed (a stopped replay
/// runs them dry: rule C17). `strict = false`: strict recomputation (which
/// `REMAT_STRICT_RECOMPUTE=1` turns on for the whole process) always
/// replays the whole body (rule C18).
#[checkpoint(early_stop = stop, strict = false)]
fn tail(x: &Tensor, runs: Arc<AtomicUsize>, stop: bool) -> Tensor {
    let h = x.sin();
    let a = &h * 2.0;
    let b = &a + 1.0;
    for t in [&a, &b] {
        if !is_placeholder(t) {
            runs.fetch_add(1, SeqCst);
        }
    }
    b
}

fn runs_of(stop: bool) -> (usize, Tensor) {
    let x = Tensor::from_slice(&[0.5f32, 1.5]).set_requires_grad(true);
    let runs = Arc::new(AtomicUsize::new(0));
    tail(&x, runs.clone(), stop).sum(Kind::Float).backward();
    (runs.load(SeqCst), x.grad().copy())
}

#[test]
fn early_stop_false_runs_the_tail_again_on_replay() {
    let (stopped, g1) = runs_of(true);
    let (whole, g2) = runs_of(false);
    assert_eq!(stopped, 2, "early stop: the forward's tail only");
    assert_eq!(whole, 4, "without: the replay runs the tail again");
    let x = Tensor::from_slice(&[0.5f32, 1.5]);
    let expected = x.cos() * 2.0;
    assert_bitwise(&g1, &expected, "gradient, early stop");
    assert_bitwise(&g2, &expected, "gradient, whole replay");
}

/// A gradient penalty taken inside the body: `sum(tanh(x w)^2)`, plus the
/// squared norm of its gradient with respect to `x` (with `create_graph`).
#[checkpoint(backward_inside = true)]
fn penalty(x: &Tensor, w: &Tensor) -> Tensor {
    let h = x.matmul(w).tanh();
    let y = (&h * &h).sum(Kind::Float);
    let g = Tensor::run_backward(&[&y], &[x], true, true).remove(0);
    y + (&g * &g).sum(Kind::Float)
}

#[test]
fn backward_inside_true_gives_the_second_order_gradients_of_the_plain_body() {
    let x = Tensor::from_slice(&[0.5f32, -1.5, 0.25, 2.0])
        .view([2, 2])
        .set_requires_grad(true);
    let w = Tensor::from_slice(&[0.3f32, -0.7, 1.1, 0.4])
        .view([2, 2])
        .set_requires_grad(true);
    penalty(&x, &w).backward();
    let (x0, w0) = (
        x.detach().set_requires_grad(true),
        w.detach().set_requires_grad(true),
    );
    let h = x0.matmul(&w0).tanh();
    let y = (&h * &h).sum(Kind::Float);
    let g = Tensor::run_backward(&[&y], &[&x0], true, true).remove(0);
    (y + (&g * &g).sum(Kind::Float)).backward();
    assert_bitwise(&x.grad(), &x0.grad(), "input gradient");
    assert_bitwise(&w.grad(), &w0.grad(), "weight gradient");
}
