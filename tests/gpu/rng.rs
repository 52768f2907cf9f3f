//! Random numbers on CUDA: every checkpoint keeps the CUDA generator's seed
//! and offset by default (docs/semantics.md, rule C14), with no state hook
//! written. The GPT with dropout trains three Adam steps under each of the
//! four policies bit for bit as without checkpoints; draws around and in a
//! skipped `save` region recompute bitwise; backward leaves the caller's
//! CUDA generator where it was.

use crate::check;
use remat::autograd::{rng_state, GeneratorLock};
use remat::nn::{self, OptimizerConfig};
use remat::{checkpoint, recompute_needs_tensor, region, Policy};
use remat_reference::gpt_dropout::{loss, small, Gpt, Mode};
use remat_reference::testing::bits;
use tch::{Device, Kind, Tensor};

/// The losses and final variables of three Adam steps under `mode`.
fn train(device: Device, mode: Mode) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let _rng = GeneratorLock::seeded(11);
    let vs = nn::VarStore::new(device);
    let cfg = small();
    let model = Gpt::new(&vs.root(), cfg);
    let mut opt = nn::Adam::default().build(&vs, 1e-3).unwrap();
    let mut losses = Vec::new();
    for _ in 0..3 {
        let l = loss(&model, cfg, mode);
        opt.zero_grad();
        l.backward();
        opt.step();
        losses.push(bits(&l.to(Device::Cpu)));
    }
    let mut vars: Vec<_> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    (
        losses,
        vars.iter().map(|(_, v)| bits(&v.to(Device::Cpu))).collect(),
    )
}

#[test]
fn cuda_dropout_recomputes_bitwise_by_default() {
    check("cuda_dropout_recomputes_bitwise_by_default", |device| {
        let plain = train(device, Mode::Plain);
        for mode in &Mode::ALL[1..] {
            let got = train(device, *mode);
            assert!(
                got.0 == plain.0,
                "{mode:?}: the losses differ from the plain model's"
            );
            assert!(
                got.1 == plain.1,
                "{mode:?}: the variables after 3 steps differ"
            );
        }
        "3 Adam steps under full, selective and save_mlp, no state hook".into()
    });
}

/// The gradient of draws around and in a `save` region on `device`, the
/// checkpoint on or off, and whether backward left the device's generator
/// where it found it.
fn regions(device: Device, on: bool) -> (Vec<u32>, bool) {
    let _rng = GeneratorLock::seeded(5);
    let x = Tensor::linspace(-1.0, 1.0, 64 * 64, (Kind::Float, device))
        .reshape([64, 64])
        .set_requires_grad(true);
    let y = checkpoint("regions").enabled(on).call(&x, |x| {
        let h = (x.tanh() * 3).dropout(0.5, true);
        let b = region("drawing", Policy::Save).call(&h, |h| h.sin() * h.rand_like());
        recompute_needs_tensor(&b);
        let k = b.cos().dropout(0.5, true);
        k.sin() * &x
    });
    let before = rng_state(device).unwrap();
    y.sum(Kind::Float).backward();
    let untouched = rng_state(device).unwrap().equal(&before);
    (bits(&x.grad().to(Device::Cpu)), untouched)
}

#[test]
fn cuda_draws_around_a_skipped_region_recompute_bitwise() {
    check(
        "cuda_draws_around_a_skipped_region_recompute_bitwise",
        |device| {
            let (plain, _) = regions(device, false);
            let (remat, untouched) = regions(device, true);
            assert!(remat == plain, "the gradients differ from the plain code's");
            assert!(untouched, "backward moved the caller's CUDA generator");
            "dropout and rand_like before, in and after a save region".into()
        },
    );
}
