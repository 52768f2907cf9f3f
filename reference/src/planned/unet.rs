//! A UNet-shaped convolutional model for the planner: two down blocks, a
//! middle block and two up blocks, each an `auto()` checkpoint with
//! `Policy::Auto` regions `in` and `out` (group norm, SiLU, 3x3
//! convolution). Each down block's output is held until the up block of
//! its resolution takes it as a second input (a skip connection between
//! checkpoints), and every block has other shapes: five kinds.

use super::{mse, norm_weight, parameter, values, Planned};
use remat::{checkpoint, recompute_needs_tensor, region, Policy};
use tch::Tensor;

/// Batch, input channels and resolution of [`UNet`]: 4 images of 4
/// channels at 32x32, widths 32 and 64.
const B: i64 = 4;
const CHANNELS: i64 = 4;
const SIZE: i64 = 32;
const WIDTH: [i64; 2] = [32, 64];

/// A residual block `cin -> cout`: two norm, SiLU, conv steps and a 1x1
/// convolution on the skip path when the widths differ.
struct ResBlock {
    norm1: (Tensor, Tensor),
    conv1: Tensor,
    norm2: (Tensor, Tensor),
    conv2: Tensor,
    skip: Option<Tensor>,
}

impl ResBlock {
    fn new(cin: i64, cout: i64, seed: f64) -> ResBlock {
        let conv = |cin: i64, k: i64, seed: f64| {
            parameter(
                &[cout, cin, k, k],
                seed,
                1.0 / ((cin * k * k) as f64).sqrt(),
            )
        };
        ResBlock {
            norm1: (norm_weight(cin, seed), parameter(&[cin], seed + 1.0, 0.1)),
            conv1: conv(cin, 3, seed + 2.0),
            norm2: (
                norm_weight(cout, seed + 3.0),
                parameter(&[cout], seed + 4.0, 0.1),
            ),
            conv2: conv(cout, 3, seed + 5.0),
            skip: (cin != cout).then(|| conv(cin, 1, seed + 6.0)),
        }
    }

    fn shallow(&self) -> ResBlock {
        let pair = |p: &(Tensor, Tensor)| (p.0.shallow_clone(), p.1.shallow_clone());
        ResBlock {
            norm1: pair(&self.norm1),
            conv1: self.conv1.shallow_clone(),
            norm2: pair(&self.norm2),
            conv2: self.conv2.shallow_clone(),
            skip: self.skip.as_ref().map(Tensor::shallow_clone),
        }
    }

    fn parameters(&self) -> Vec<Tensor> {
        let mut out = vec![
            self.norm1.0.shallow_clone(),
            self.norm1.1.shallow_clone(),
            self.conv1.shallow_clone(),
            self.norm2.0.shallow_clone(),
            self.norm2.1.shallow_clone(),
            self.conv2.shallow_clone(),
        ];
        out.extend(self.skip.as_ref().map(Tensor::shallow_clone));
        out
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let step = |x: &Tensor, (w, b): &(Tensor, Tensor), conv: &Tensor| {
            x.group_norm(8, Some(w), Some(b), 1e-5, false)
                .silu()
                .conv2d::<Tensor>(conv, None, [1, 1], [1, 1], [1, 1], 1)
        };
        let h = region("in", Policy::Auto).call(x, |x| step(x, &self.norm1, &self.conv1));
        recompute_needs_tensor(&h);
        let h = region("out", Policy::Auto).call(&h, |h| step(h, &self.norm2, &self.conv2));
        recompute_needs_tensor(&h);
        let skip = match &self.skip {
            Some(w) => x.conv2d::<Tensor>(w, None, [1, 1], [0, 0], [1, 1], 1),
            None => x.shallow_clone(),
        };
        skip + h
    }
}

/// The model with its batch (images and targets).
pub struct UNet {
    conv_in: Tensor,
    down: [ResBlock; 2],
    mid: ResBlock,
    up: [ResBlock; 2],
    conv_out: Tensor,
    x: Tensor,
    target: Tensor,
}

impl UNet {
    /// The model.
    ///
    /// ```
    /// use remat_reference::planned::{unet::UNet, Planned};
    /// UNet::new().loss().backward();
    /// ```
    pub fn new() -> UNet {
        let [w0, w1] = WIDTH;
        UNet {
            conv_in: parameter(&[w0, CHANNELS, 3, 3], 1.0, 0.3),
            down: [ResBlock::new(w0, w0, 10.0), ResBlock::new(w0, w1, 20.0)],
            mid: ResBlock::new(w1, w1, 30.0),
            // Up blocks take the upsampled path and the skip, concatenated.
            up: [
                ResBlock::new(w1 + w0, w0, 40.0),
                ResBlock::new(w1 + w1, w1, 50.0),
            ],
            conv_out: parameter(&[CHANNELS, w0, 3, 3], 2.0, 0.1),
            x: values(&[B, CHANNELS, SIZE, SIZE], 3.0, 1.0),
            target: values(&[B, CHANNELS, SIZE, SIZE], 4.0, 1.0),
        }
    }
}

impl Default for UNet {
    fn default() -> UNet {
        UNet::new()
    }
}

/// `block` as checkpoint `name` on one input.
fn down(name: &str, block: &ResBlock, x: &Tensor) -> Tensor {
    let p = block.shallow();
    checkpoint(name).auto().call(x, move |x| p.forward(&x))
}

/// `block` as checkpoint `name` on the path from below (upsampled here)
/// and the skip from the down block of this resolution.
fn up(name: &str, block: &ResBlock, h: &Tensor, skip: &Tensor) -> Tensor {
    let p = block.shallow();
    let h = h.upsample_nearest2d([skip.size()[2], skip.size()[3]], None, None);
    checkpoint(name).auto().call((&h, skip), move |(h, skip)| {
        p.forward(&Tensor::cat(&[h, skip], 1))
    })
}

impl Planned for UNet {
    fn name(&self) -> String {
        "unet".into()
    }

    fn loss(&self) -> Tensor {
        let x = self
            .x
            .conv2d::<Tensor>(&self.conv_in, None, [1, 1], [1, 1], [1, 1], 1);
        let s0 = down("down.0", &self.down[0], &x);
        let s1 = down(
            "down.1",
            &self.down[1],
            &s0.avg_pool2d([2, 2], [2, 2], [0, 0], false, true, None),
        );
        let h = down(
            "mid",
            &self.mid,
            &s1.avg_pool2d([2, 2], [2, 2], [0, 0], false, true, None),
        );
        let h = up("up.1", &self.up[1], &h, &s1);
        let h = up("up.0", &self.up[0], &h, &s0);
        let y = h.conv2d::<Tensor>(&self.conv_out, None, [1, 1], [1, 1], [1, 1], 1);
        mse(&y, &self.target)
    }

    fn parameters(&self) -> Vec<Tensor> {
        let mut out = vec![self.conv_in.shallow_clone(), self.conv_out.shallow_clone()];
        for b in self.down.iter().chain([&self.mid]).chain(&self.up) {
            out.extend(b.parameters());
        }
        out
    }
}
