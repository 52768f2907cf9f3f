//! A small GPT with dropout, written with `remat::nn` (`seq_t` with
//! closures) and the macros (`remat_reference::gpt_dropout`, which the tests
//! use too). No state hook is written: every checkpoint keeps the random
//! state for its recomputation (docs/semantics.md, rule C14), so that
//! recomputation draws the forward's dropout masks and the losses with and
//! without checkpoints are bit-identical under every policy.
//!
//! `cargo run --example gpt_dropout`

use remat::nn::{self, OptimizerConfig};
use remat_reference::gpt_dropout::{loss, small, Gpt, Mode};

fn train(mode: Mode) -> Vec<f32> {
    let cfg = small();
    tch::manual_seed(11);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let model = Gpt::new(&vs.root(), cfg);
    let mut opt = nn::Adam::default().build(&vs, 1e-2).unwrap();
    (0..3)
        .map(|_| {
            let l = loss(&model, cfg, mode);
            opt.backward_step(&l);
            f32::try_from(&l).unwrap()
        })
        .collect()
}

fn main() {
    tch::set_num_threads(1);
    let plain = train(Mode::Plain);
    for mode in &Mode::ALL[1..] {
        let losses = train(*mode);
        println!("{mode:?}: losses {losses:?} (plain {plain:?})");
        assert_eq!(losses, plain);
    }
    println!("dropout replayed bit-identically under every mode");
}
