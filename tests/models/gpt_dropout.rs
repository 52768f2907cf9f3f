//! The GPT with dropout: three Adam steps with remat (and `RngStateHook`)
//! are bit-identical to three without, replayed whole and with the attention
//! in a `save` region; without the hook replay draws other masks.

#[path = "gpt_dropout_model.rs"]
pub mod model;

use crate::harness::{assert_same, train, Run};
use model::{loss, small, Gpt, Mode};

fn run(mode: Mode) -> Run {
    let cfg = small();
    train(11, |vs| Gpt::new(vs, cfg), |m, _| loss(m, cfg, mode))
}

#[test]
fn whole_block_checkpoints_match_the_plain_model_bitwise() {
    let _serial = crate::serial();
    assert_same(&run(Mode::Whole), &run(Mode::Plain), "whole blocks");
}

#[test]
fn save_region_checkpoints_match_the_plain_model_bitwise() {
    let _serial = crate::serial();
    assert_same(
        &run(Mode::SaveAttention),
        &run(Mode::Plain),
        "save attention",
    );
}
