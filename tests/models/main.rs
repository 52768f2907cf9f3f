//! Real models written with `remat::nn` and the macros: a ResNet-style CNN
//! with batch norm (train mode) and a GPT with dropout, both from
//! `remat_reference`, and the tch-style code `remat::nn` accepts in place of
//! `tch::nn`. Each trains or runs with and without remat; everything must be
//! bit-identical. A binary of its own, and every test holds
//! `remat::autograd::GeneratorLock` while it seeds and draws: the models draw from
//! libtorch's process-wide generator (docs/testing.md).

use remat_reference::testing as common;

mod drop_in;
mod gpt_dropout;
mod harness;
mod resnet;
mod state;
