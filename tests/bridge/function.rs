use crate::{leaf, values};
use remat::{
    autograd::apply, autograd::try_apply, autograd::BackwardContext, autograd::ForwardContext,
    autograd::Function, Error, Result,
};
use remat_reference::testing::assert_bitwise;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tch::{Kind, Tensor};

/// `x^3` with a hand-written backward.
struct Cube;

impl Function for Cube {
    fn name(&self) -> &str {
        "Cube"
    }
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        ctx.save_for_backward([("x", inputs[0])]);
        Ok(vec![inputs[0] * inputs[0] * inputs[0]])
    }
    fn backward(&mut self, ctx: &BackwardContext<'_>, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let x = ctx.saved("x")?;
        Ok(vec![Some(&g[0] * 3 * &x * &x)])
    }
}

#[test]
fn gradient_equals_the_analytic_one() {
    let x = leaf(&[0.5, -1.0, 2.0]);
    let y = apply(Cube, &[&x]).remove(0);
    assert!(y.requires_grad());
    y.sum(Kind::Float).backward();
    let expected = tch::no_grad(|| &x * &x * 3);
    assert_bitwise(
        &x.grad(),
        &expected,
        "the gradient of x³ through the custom function",
    );
    assert_eq!(values(&y.detach()), [0.125, -1.0, 8.0]);
}

#[test]
fn two_outputs_and_an_input_without_grad() {
    struct SplitMul;
    impl Function for SplitMul {
        fn forward(&mut self, ctx: &mut ForwardContext, i: &[&Tensor]) -> Result<Vec<Tensor>> {
            ctx.save_for_backward([("x", i[0]), ("w", i[1])]);
            Ok(vec![i[0] * i[1], i[0] + i[1]])
        }
        fn backward(
            &mut self,
            ctx: &BackwardContext<'_>,
            g: &[Tensor],
        ) -> Result<Vec<Option<Tensor>>> {
            assert!(ctx.needs_input_grad(0));
            assert!(!ctx.needs_input_grad(1));
            let w = ctx.saved("w")?;
            Ok(vec![Some(&g[0] * w + &g[1]), None])
        }
    }
    let x = leaf(&[1.0, 2.0]);
    let w = Tensor::from_slice(&[3.0f32, 4.0]);
    let out = apply(SplitMul, &[&x, &w]);
    // Only the first output is used: the second gets zeros.
    out[0].sum(Kind::Float).backward();
    assert_eq!(values(&x.grad()), [3.0, 4.0]);
}

struct Failing {
    panic: bool,
}

impl Function for Failing {
    fn name(&self) -> &str {
        "Failing"
    }
    fn forward(&mut self, _: &mut ForwardContext, i: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![i[0] * 2])
    }
    fn backward(&mut self, _: &BackwardContext<'_>, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        if self.panic {
            panic!("boom in backward");
        }
        Err(Error::torch("the backward refused"))
    }
}

#[test]
fn backward_error_is_an_err_from_f_backward() {
    let x = leaf(&[1.0]);
    let y = apply(Failing { panic: false }, &[&x]).remove(0);
    let err = y.sum(Kind::Float).f_backward().unwrap_err().to_string();
    assert!(
        err.contains("custom function `Failing`: backward failed: the backward refused"),
        "{err}"
    );
}

#[test]
fn backward_panic_is_an_err_from_f_backward() {
    let x = leaf(&[1.0]);
    let y = apply(Failing { panic: true }, &[&x]).remove(0);
    let err = y.sum(Kind::Float).f_backward().unwrap_err().to_string();
    assert!(
        err.contains("custom function `Failing`: backward panicked: boom in backward"),
        "{err}"
    );
    // The process and autograd are fine afterwards.
    let z = leaf(&[2.0]);
    (&z * &z).sum(Kind::Float).backward();
    assert_eq!(values(&z.grad()), [4.0]);
}

#[test]
fn wrong_gradient_count_is_an_error() {
    struct TooMany;
    impl Function for TooMany {
        fn name(&self) -> &str {
            "TooMany"
        }
        fn forward(&mut self, _: &mut ForwardContext, i: &[&Tensor]) -> Result<Vec<Tensor>> {
            Ok(vec![i[0] * 2])
        }
        fn backward(
            &mut self,
            _: &BackwardContext<'_>,
            g: &[Tensor],
        ) -> Result<Vec<Option<Tensor>>> {
            Ok(vec![Some(g[0].shallow_clone()), None])
        }
    }
    let x = leaf(&[1.0]);
    let y = apply(TooMany, &[&x]).remove(0);
    let err = y.sum(Kind::Float).f_backward().unwrap_err().to_string();
    assert!(
        err.contains("backward returned 2 gradients for 1 inputs"),
        "{err}"
    );
}

#[test]
fn missing_saved_name_says_how_to_save_it() {
    struct AsksWrongName;
    impl Function for AsksWrongName {
        fn name(&self) -> &str {
            "AsksWrongName"
        }
        fn forward(&mut self, ctx: &mut ForwardContext, i: &[&Tensor]) -> Result<Vec<Tensor>> {
            ctx.save_for_backward([("x", i[0])]);
            Ok(vec![i[0] * 2])
        }
        fn backward(
            &mut self,
            ctx: &BackwardContext<'_>,
            _: &[Tensor],
        ) -> Result<Vec<Option<Tensor>>> {
            Ok(vec![Some(ctx.saved("y")?)])
        }
    }
    let x = leaf(&[1.0]);
    let y = apply(AsksWrongName, &[&x]).remove(0);
    let err = y.sum(Kind::Float).f_backward().unwrap_err().to_string();
    assert!(err.contains("no tensor was saved as `y`"), "{err}");
}

/// Counts live instances, to see when the graph drops the function.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Tracked(#[allow(dead_code)] Counted);

impl Function for Tracked {
    fn forward(&mut self, ctx: &mut ForwardContext, i: &[&Tensor]) -> Result<Vec<Tensor>> {
        let y = i[0] * 2;
        ctx.save_for_backward([("x", i[0])]);
        Ok(vec![y])
    }
    fn backward(&mut self, _: &BackwardContext<'_>, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(&g[0] * 2)])
    }
}

fn tracked(live: &Arc<AtomicUsize>) -> Tracked {
    live.fetch_add(1, Ordering::SeqCst);
    Tracked(Counted(live.clone()))
}

#[test]
fn dropping_the_graph_without_backward_drops_the_function() {
    let live = Arc::new(AtomicUsize::new(0));
    let x = leaf(&[1.0, 2.0]);
    let y = apply(tracked(&live), &[&x]).remove(0);
    let z = &y + 1;
    assert_eq!(live.load(Ordering::SeqCst), 1);
    drop(y);
    assert_eq!(live.load(Ordering::SeqCst), 1, "z still holds the graph");
    drop(z);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn no_grad_needed_means_no_node() {
    let live = Arc::new(AtomicUsize::new(0));
    let x = Tensor::from_slice(&[1.0f32]);
    let y = apply(tracked(&live), &[&x]).remove(0);
    assert!(!y.requires_grad());
    assert_eq!(live.load(Ordering::SeqCst), 0, "function dropped at once");
    let x = leaf(&[1.0]);
    let y = tch::no_grad(|| apply(tracked(&live), &[&x]).remove(0));
    assert!(!y.requires_grad());
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn retain_graph_allows_a_second_backward() {
    let x = leaf(&[1.0, 3.0]);
    let y = apply(Cube, &[&x]).remove(0).sum(Kind::Float);
    remat::autograd::backward_with(&y, true).unwrap();
    y.backward();
    assert_eq!(values(&x.grad()), [6.0, 54.0]);
    let err = y.f_backward().unwrap_err().to_string();
    assert!(err.contains("second time"), "{err}");
}

#[test]
fn forward_error_is_returned() {
    struct BadForward;
    impl Function for BadForward {
        fn forward(&mut self, _: &mut ForwardContext, i: &[&Tensor]) -> Result<Vec<Tensor>> {
            Ok(vec![i[0].f_matmul(i[0])?])
        }
        fn backward(
            &mut self,
            _: &BackwardContext<'_>,
            _: &[Tensor],
        ) -> Result<Vec<Option<Tensor>>> {
            Ok(vec![None])
        }
    }
    let x = Tensor::ones([2, 3], tch::kind::FLOAT_CPU).set_requires_grad(true);
    let err = try_apply(BadForward, &[&x]).unwrap_err().to_string();
    assert!(err.contains("cannot be multiplied"), "{err}");
    assert!(!err.contains('\n'), "only the first line: {err}");
}
