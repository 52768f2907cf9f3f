//! A ResNet-style CNN with batch norm (train mode), written with `remat::nn`
//! and the macros (`remat_reference::resnet`, which the tests use too): three
//! training steps with and without checkpoints give the same losses and the
//! same running statistics, bit for bit.
//!
//! `cargo run --example resnet`

use remat::nn::{self, OptimizerConfig};
use remat_reference::resnet::{loss, Mode, ResNet};

fn train(mode: Mode) -> (Vec<f32>, tch::Tensor) {
    tch::manual_seed(7);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let model = ResNet::new(&vs.root(), 4, 2, 10);
    let mut opt = nn::Adam::default().build(&vs, 1e-2).unwrap();
    let losses = (0..3)
        .map(|_| {
            let l = loss(&model, mode);
            opt.backward_step(&l);
            f32::try_from(&l).unwrap()
        })
        .collect();
    (losses, vs.variables()["layers.0.bn1.running_mean"].copy())
}

fn main() {
    tch::set_num_threads(1);
    let (plain, plain_mean) = train(Mode::Plain);
    for mode in [Mode::Whole, Mode::SaveStem] {
        let (losses, mean) = train(mode);
        println!("{mode:?}: losses {losses:?} (plain {plain:?})");
        assert_eq!(losses, plain);
        assert!(mean.equal(&plain_mean), "running statistics differ");
    }
    println!("running statistics bit-identical under every mode");
}
