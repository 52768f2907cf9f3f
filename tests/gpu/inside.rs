//! Gradients computed inside a checkpointed closure on CUDA (docs/semantics.md,
//! rule C16): the closure's own backward runs on autograd's worker thread
//! for the device, which unpacks the checkpoint's saves there while the
//! forward still runs on the calling thread, so the kept forward values
//! must be served across threads; second-order gradients bitwise as
//! without checkpoints.

use crate::check;
use remat::{checkpoint, region, Policy};
use remat_reference::testing::penalised;
use tch::{Device, Kind, Tensor};

/// How the closure is checkpointed: not at all, whole, or with its matmul
/// in a region of the given policy.
#[derive(Clone, Copy, Debug)]
enum Way {
    Plain,
    Whole,
    Region(Policy),
}

/// The outer backward's gradients of the input and the weight, on the CPU.
fn gradients(device: Device, way: Way) -> (Tensor, Tensor) {
    let opts = (Kind::Float, device);
    let x = Tensor::linspace(-1.0, 1.0, 256 * 64, opts)
        .view([256, 64])
        .set_requires_grad(true);
    let w =
        (Tensor::linspace(-0.5, 0.5, 64 * 64, opts).view([64, 64]) * 1.1).set_requires_grad(true);
    let wc = w.shallow_clone();
    let middle = move |x: &Tensor| x.matmul(&wc).tanh();
    let loss = match way {
        Way::Plain => penalised(&x, middle(&x)),
        Way::Whole => checkpoint("c")
            .backward_inside(true)
            .call(&x, move |x| penalised(&x, middle(&x))),
        Way::Region(policy) => checkpoint("c").backward_inside(true).call(&x, move |x| {
            let h = region("h", policy).call_saved(&x, &middle);
            penalised(&x, remat::needs(h))
        }),
    };
    loss.backward();
    (x.grad().to(Device::Cpu), w.grad().to(Device::Cpu))
}

#[test]
fn gradients_inside_a_checkpoint_bitwise() {
    check("gradients_inside_a_checkpoint_bitwise", |device| {
        let (gx0, gw0) = gradients(device, Way::Plain);
        let ways = [
            Way::Whole,
            Way::Region(Policy::Save),
            Way::Region(Policy::Recompute),
        ];
        for way in ways {
            let (gx, gw) = gradients(device, way);
            let same = |a: &Tensor, b: &Tensor| {
                remat_reference::testing::bits(a) == remat_reference::testing::bits(b)
            };
            assert!(same(&gx, &gx0), "{way:?}: the input gradient differs");
            assert!(same(&gw, &gw0), "{way:?}: the weight gradient differs");
        }
        format!("{} ways, second-order gradients bitwise", ways.len())
    });
}
