//! The GPT with dropout: three Adam steps with remat are bit-identical to
//! three without, under each of the reference model's four policies, with
//! every default: no state hook is written, since every checkpoint keeps
//! the random state (docs/semantics.md, rule C14). tests/rng has the
//! same model opted out, and the other draws.

use crate::harness::{assert_same, train, Run};
use remat::autograd::GeneratorLock;
use remat_reference::gpt_dropout::{loss, small, Gpt, Mode};

fn run(mode: Mode) -> Run {
    let cfg = small();
    train(11, |vs| Gpt::new(vs, cfg), |m, _| loss(m, cfg, mode))
}

// The lock is held across the runs: each seeds at its start, and no other
// test of this binary may draw between that seed and its last dropout.
#[test]
// docs/semantics.md, rule C14.
fn every_policy_matches_the_plain_model_bitwise_with_every_default() {
    let _rng = GeneratorLock::acquire();
    let plain = run(Mode::Plain);
    for mode in &Mode::ALL[1..] {
        assert_same(&run(*mode), &plain, &format!("{mode:?}"));
    }
}
