//! The GPT with dropout: three Adam steps with remat (and `RngStateHook`)
//! are bit-identical to three without, replayed whole and with the attention
//! in a `save` region; without the hook replay draws other masks.

use crate::harness::{assert_same, train, Run};
use remat::autograd::GeneratorLock;
use remat_reference::gpt_dropout::{loss, small, Gpt, Mode};

fn run(mode: Mode) -> Run {
    let cfg = small();
    train(11, |vs| Gpt::new(vs, cfg), |m, _| loss(m, cfg, mode))
}

// The lock is held across both runs: each seeds at its start, and no other
// test of this binary may draw between that seed and its last dropout.
#[test]
fn whole_block_checkpoints_match_the_plain_model_bitwise() {
    let _rng = GeneratorLock::acquire();
    assert_same(&run(Mode::Whole), &run(Mode::Plain), "whole blocks");
}

#[test]
fn save_region_checkpoints_match_the_plain_model_bitwise() {
    let _rng = GeneratorLock::acquire();
    assert_same(
        &run(Mode::SaveAttention),
        &run(Mode::Plain),
        "save attention",
    );
}
