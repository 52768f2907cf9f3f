//! The GPT with dropout (`remat_reference::gpt_dropout`), whose blocks carry
//! no state hook: under each of the reference model's four policies its
//! gradients are the plain model's, bitwise, with every default, under bf16
//! autocast and with early stop on too; switched off process-wide,
//! recomputation draws other masks (docs/semantics.md, rule C14).

use remat::autograd::GeneratorLock;
use remat::{autocast, Checkpoint};
use remat_reference::gpt_dropout::{loss, small, Gpt, Mode};
use remat_reference::testing::{assert_same_run, Run};
use tch::{Device, Kind};

/// One forward and backward of a fresh model from seed 11.
fn step(mode: Mode, bf16: bool) -> Run {
    tch::manual_seed(11);
    let cfg = small();
    let vs = remat::nn::VarStore::new(Device::Cpu);
    let model = Gpt::new(&vs.root(), cfg);
    let l = if bf16 {
        autocast(Device::Cpu, Kind::BFloat16, || loss(&model, cfg, mode))
    } else {
        loss(&model, cfg, mode)
    };
    l.backward();
    let mut vars: Vec<_> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    Run::of(&l, vars)
}

#[test]
// docs/semantics.md, rules C14, A2 and C17.
fn every_policy_with_autocast_and_early_stop_draws_the_forward_masks() {
    let _rng = GeneratorLock::acquire();
    tch::set_num_threads(1);
    for bf16 in [false, true] {
        let plain = step(Mode::Plain, bf16);
        for early_stop in [false, true] {
            Checkpoint::set_default_early_stop(early_stop);
            let runs: Vec<_> = Mode::ALL[1..].iter().map(|&m| (m, step(m, bf16))).collect();
            Checkpoint::set_default_early_stop(false);
            for (mode, run) in runs {
                let what = format!("{mode:?}, bf16 {bf16}, early stop {early_stop}");
                assert_same_run(&run, &plain, &what);
            }
        }
    }
}

#[test]
// docs/semantics.md, rule C14: the process-wide switch.
fn switched_off_process_wide_recomputation_draws_other_masks() {
    let _rng = GeneratorLock::acquire();
    tch::set_num_threads(1);
    let plain = step(Mode::Plain, false);
    Checkpoint::set_default_preserve_rng_state(false);
    let whole = std::panic::catch_unwind(|| step(Mode::Whole, false));
    Checkpoint::set_default_preserve_rng_state(true);
    let whole = whole.expect("training runs either way");
    assert!(whole.loss.equal(&plain.loss), "the forward is the same");
    let differs = whole
        .grads
        .iter()
        .zip(&plain.grads)
        .any(|((_, a), (_, b))| !a.equal(b));
    assert!(
        differs,
        "recomputation drew the forward's masks although switched off"
    );
}
