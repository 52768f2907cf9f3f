//! The ResNet with batch norm in train mode: three Adam steps with remat are
//! bit-identical to three without (loss, every gradient, every parameter,
//! every running statistic), replayed whole and with a `save` region.

use crate::harness::{assert_same, train};
use remat::autograd::GeneratorLock;
use remat_reference::resnet::{loss, Mode, ResNet};

fn run(mode: Mode) -> crate::harness::Run {
    train(7, |vs| ResNet::new(vs, 4, 2, 10), |m, _| loss(m, mode))
}

#[test]
fn whole_block_checkpoints_match_the_plain_model_bitwise() {
    let _rng = GeneratorLock::acquire();
    assert_same(&run(Mode::Whole), &run(Mode::Plain), "whole blocks");
}

#[test]
fn save_region_checkpoints_match_the_plain_model_bitwise() {
    let _rng = GeneratorLock::acquire();
    assert_same(&run(Mode::SaveStem), &run(Mode::Plain), "save stem");
}
