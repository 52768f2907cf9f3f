//! Dropout on CUDA: the GPT with dropout replays under `RngStateHook`,
//! which must restore the CUDA generator too (`RngStateHook::all`), so that
//! three Adam steps with checkpoints equal three without, bit for bit.

use crate::check;
use remat::nn::{self, OptimizerConfig};
use remat_reference::gpt_dropout::{loss, small, Gpt, Mode};
use remat_reference::testing::bits;
use tch::Device;

/// The losses and final variables of three Adam steps under `mode`.
fn train(device: Device, mode: Mode) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let _rng = remat::autograd::GeneratorLock::seeded(11);
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
fn rng_state_hook_replays_cuda_dropout_bitwise() {
    check("rng_state_hook_replays_cuda_dropout_bitwise", |device| {
        let plain = train(device, Mode::Plain);
        for mode in [Mode::Whole, Mode::SaveAttention] {
            let got = train(device, mode);
            assert!(
                got.0 == plain.0,
                "{mode:?}: the losses differ from the plain model's"
            );
            assert!(
                got.1 == plain.1,
                "{mode:?}: the variables after 3 steps differ"
            );
        }
        "3 Adam steps, whole blocks and a save region".into()
    });
}
