//! What the view, path and adversarial tests compare with: a model's
//! gradients without the checkpoint, and a region body that keeps nothing of
//! its output.

use crate::common::{assert_bitwise, input};
use remat::autograd::backward_with;
use remat::checkpoint;
use tch::{Kind, Tensor};

/// A `Save` region's body that saves nothing of its output (`x * 3 + 1`),
/// so nothing keeps an output unless it is asked for.
pub(crate) fn teach(x: &Tensor) -> Tensor {
    x * 3.0 + 1.0
}

/// `body` in checkpoint `c`, under each strictness of `strict`, gives the
/// gradients of `x` it gives without the checkpoint, bit for bit.
pub(crate) fn same_as_plain(what: &str, strict: &[bool], body: fn(Tensor) -> Tensor) {
    let plain = {
        let x = input();
        checkpoint("c")
            .enabled(false)
            .call(&x, body)
            .sum(Kind::Float)
            .backward();
        x.grad()
    };
    for &strict in strict {
        let x = input();
        let y = checkpoint("c").strict_recompute(strict).call(&x, body);
        backward_with(&y.sum(Kind::Float), false)
            .unwrap_or_else(|e| panic!("{what}, strict {strict}: {e}"));
        assert_bitwise(&x.grad(), &plain, &format!("{what}, strict {strict}"));
    }
}
