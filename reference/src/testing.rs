//! What the integration tests share: inputs, counters, and comparisons that
//! are bitwise (the bar for gradients under every policy) and say what
//! differed. A module of this crate, not a file the tests include by path,
//! so that every test binary and example uses the same one.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use tch::{Kind, Tensor};

/// A small float input that requires grad.
///
/// ```
/// assert!(remat_reference::testing::input().requires_grad());
/// ```
pub fn input() -> Tensor {
    Tensor::from_slice(&[0.3f32, -1.2, 0.7, 2.0])
        .view([2, 2])
        .set_requires_grad(true)
}

/// A shared counter for closures.
///
/// ```
/// use std::sync::atomic::Ordering::SeqCst;
/// let c = remat_reference::testing::counter();
/// c.fetch_add(1, SeqCst);
/// assert_eq!(c.load(SeqCst), 1);
/// ```
pub fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// `x`'s gradient of `loss` (zeroing any earlier one).
///
/// ```
/// let x = remat_reference::testing::input();
/// let g = remat_reference::testing::grad_of(&x, &(&x * 2.0).sum(tch::Kind::Float));
/// assert!(g.equal(&(x.ones_like() * 2.0)));
/// ```
pub fn grad_of(x: &Tensor, loss: &Tensor) -> Tensor {
    let _ = x.grad().f_zero_();
    loss.backward();
    x.grad().copy()
}

/// The bits of `t`'s values as `f32` (exact for every float dtype up to
/// fp32, so bf16 and fp16 compare bitwise too).
///
/// ```
/// let t = tch::Tensor::from_slice(&[1.0f32]);
/// assert_eq!(remat_reference::testing::bits(&t), [1.0f32.to_bits()]);
/// ```
pub fn bits(t: &Tensor) -> Vec<u32> {
    Vec::<f32>::try_from(t.to_kind(Kind::Float).flatten(0, -1))
        .unwrap()
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

/// Panics, naming `what`, unless `a` and `b` have the same shape and bits.
///
/// ```
/// let t = tch::Tensor::from_slice(&[0.5f32, 2.0]);
/// remat_reference::testing::assert_bitwise(&t, &t.copy(), "a copy");
/// ```
pub fn assert_bitwise(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.size(), b.size(), "{what}: shapes differ");
    assert!(bits(a) == bits(b), "{what}: values differ");
}

/// The message of a panic (from `catch_unwind`), as text; panics if `r`
/// did not fail.
///
/// ```
/// let r = std::panic::catch_unwind(|| panic!("boom"));
/// assert_eq!(remat_reference::testing::message(r), "boom");
/// ```
pub fn message<T>(r: std::thread::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected a failure"),
        Err(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    }
}

/// Every plan a profile allows: one choice index per layer, all `K^L` of
/// them, for brute-force checks of the planner on small models.
///
/// ```no_run
/// # fn f(profile: &remat::planner::Profile) {
/// for choices in remat_reference::testing::assignments(profile) {
///     let _ = remat::planner::predict(profile, &choices);
/// }
/// # }
/// ```
pub fn assignments(profile: &remat::planner::Profile) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for &k in &profile.layer_kind {
        let n = profile.kinds[k].choices.len();
        out = out
            .into_iter()
            .flat_map(|prefix| {
                (0..n).map(move |c| {
                    let mut next = prefix.clone();
                    next.push(c);
                    next
                })
            })
            .collect();
    }
    out
}

/// What one forward and backward leaves to compare: the loss and every
/// named parameter's gradient, copied (so that a later `zero_grad` or step
/// leaves them alone).
pub struct Run {
    /// The loss, detached.
    pub loss: Tensor,
    /// Each parameter's gradient by name, in the order given.
    pub grads: Vec<(String, Tensor)>,
}

impl Run {
    /// The run whose backward of `loss` has filled `params`' gradients.
    ///
    /// ```
    /// let w = tch::Tensor::from_slice(&[2.0f32]).set_requires_grad(true);
    /// let loss = (&w * &w).sum(tch::Kind::Float);
    /// loss.backward();
    /// let run = remat_reference::testing::Run::of(&loss, [("w".to_string(), w)]);
    /// assert_eq!(run.grads[0].0, "w");
    /// ```
    pub fn of<P: std::borrow::Borrow<Tensor>>(
        loss: &Tensor,
        params: impl IntoIterator<Item = (String, P)>,
    ) -> Run {
        Run {
            loss: loss.detach().copy(),
            grads: params
                .into_iter()
                .map(|(name, p)| (name, p.borrow().grad().copy()))
                .collect(),
        }
    }
}

/// Panics, naming `what` and the first parameter that differs, unless
/// `got` has bitwise `want`'s loss and gradients and every gradient is
/// defined: the bar for a model with checkpoints against the model
/// without.
///
/// ```
/// use remat_reference::testing::{assert_same_run, Run};
/// let w = tch::Tensor::from_slice(&[2.0f32]).set_requires_grad(true);
/// let loss = (&w * &w).sum(tch::Kind::Float);
/// loss.backward();
/// let run = Run::of(&loss, [("w".to_string(), w)]);
/// assert_same_run(&run, &run, "itself");
/// ```
pub fn assert_same_run(got: &Run, want: &Run, what: &str) {
    assert_bitwise(&got.loss, &want.loss, &format!("{what}: the loss"));
    assert_eq!(
        got.grads.len(),
        want.grads.len(),
        "{what}: the number of gradients"
    );
    for ((name, g), (_, w)) in got.grads.iter().zip(&want.grads) {
        assert!(g.defined(), "{what}: `{name}` got no gradient");
        assert_bitwise(g, w, &format!("{what}: the gradient of `{name}`"));
    }
}

/// A gradient penalty on `h`, computed from `x`: `y = sum(h^2)`, its
/// gradient with respect to `x` taken with `create_graph`, and
/// `y + sum(g^2)`, so that the outer backward differentiates through the
/// inner one (the model of a gradient computed inside a checkpoint).
///
/// ```
/// let x = tch::Tensor::from_slice(&[0.5f32, -1.0]).set_requires_grad(true);
/// let loss = remat_reference::testing::penalised(&x, x.tanh());
/// loss.backward();
/// assert!(x.grad().defined());
/// ```
pub fn penalised(x: &Tensor, h: Tensor) -> Tensor {
    let y = (&h * &h).sum(Kind::Float);
    let g = Tensor::run_backward(&[&y], &[x], true, true).remove(0);
    y + (&g * &g).sum(Kind::Float)
}
