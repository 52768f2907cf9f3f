//! A model whose blocks differ, for the planner: six `auto()` checkpoints
//! `blocks.{i}` alike in name, regions (`act`, `proj`) and input shape,
//! whose hidden widths alternate between 2 and 8 times the width (so they
//! keep other bytes: kinds of their own, docs/planner.md, "Kinds"), then a
//! seventh with one region of its own.

use super::{mse, norm_weight, parameter, values, Planned};
use remat::{checkpoint, recompute_needs_tensor, region, Policy};
use tch::Tensor;

const B: i64 = 4;
const T: i64 = 128;
const D: i64 = 128;

struct Block {
    w1: Tensor,
    w2: Tensor,
}

/// The model with its batch.
pub struct Mixed {
    blocks: Vec<Block>,
    norm: (Tensor, Tensor),
    x: Tensor,
    target: Tensor,
}

impl Mixed {
    /// The model.
    ///
    /// ```
    /// use remat_reference::planned::{mixed::Mixed, Planned};
    /// Mixed::new().loss().backward();
    /// ```
    pub fn new() -> Mixed {
        let blocks = (0..6)
            .map(|i| {
                let hidden = if i % 2 == 0 { 2 * D } else { 8 * D };
                Block {
                    w1: parameter(&[hidden, D], 10.0 * i as f64, 1.0 / (D as f64).sqrt()),
                    w2: parameter(
                        &[D, hidden],
                        10.0 * i as f64 + 5.0,
                        1.0 / (hidden as f64).sqrt(),
                    ),
                }
            })
            .collect();
        Mixed {
            blocks,
            norm: (norm_weight(D, 1.0), parameter(&[D], 2.0, 0.1)),
            x: values(&[B, T, D], 3.0, 1.0).set_requires_grad(false),
            target: values(&[B, T, D], 4.0, 1.0),
        }
    }
}

impl Default for Mixed {
    fn default() -> Mixed {
        Mixed::new()
    }
}

impl Planned for Mixed {
    fn name(&self) -> String {
        "mixed".into()
    }

    fn loss(&self) -> Tensor {
        // Scaled so that the first block's input needs a gradient (the
        // profile times replays in backward).
        let mut x = &self.x * &self.norm.0.mean(tch::Kind::Float);
        for (i, b) in self.blocks.iter().enumerate() {
            let (w1, w2) = (b.w1.shallow_clone(), b.w2.shallow_clone());
            x = checkpoint(format!("blocks.{i}")).auto().call(&x, move |x| {
                let h = region("act", Policy::Auto)
                    .call(&x, |x| x.linear::<Tensor>(&w1, None).gelu("none"));
                recompute_needs_tensor(&h);
                let y =
                    region("proj", Policy::Auto).call(&h, |h| h.linear::<Tensor>(&w2, None).tanh());
                recompute_needs_tensor(&y);
                x + y
            });
        }
        let (w, b) = (self.norm.0.shallow_clone(), self.norm.1.shallow_clone());
        let y = checkpoint("blocks.6").auto().call(&x, move |x| {
            let y = region("norm", Policy::Auto).call(&x, |x| {
                x.layer_norm([D], Some(&w), Some(&b), 1e-5, false).sigmoid()
            });
            recompute_needs_tensor(&y);
            y * 2.0
        });
        mse(&y, &self.target)
    }

    fn parameters(&self) -> Vec<Tensor> {
        let mut out = vec![self.norm.0.shallow_clone(), self.norm.1.shallow_clone()];
        for b in &self.blocks {
            out.extend([b.w1.shallow_clone(), b.w2.shallow_clone()]);
        }
        out
    }
}
