//! `cargo xtask demo`: the reference model trained under each policy, by
//! the training example built optimized (`train_gpt.rs`), which `test`'s
//! checks of it are not.

use crate::train_gpt::{train_all, train_small_all};
use crate::Result;

/// The training example on the small config under all four policies (the
/// table, one block's memory report and the plots, in
/// `target/train_gpt_out`), then three steps of the medium config, whose
/// activations are large enough against libtorch's own memory that the
/// processes' peak resident memory shows what each policy saves (in
/// `target/train_gpt_out_medium`).
pub(crate) fn demo() -> Result<()> {
    eprintln!("xtask demo: building and running examples/train_gpt (a crate of its own)");
    train_small_all("train_gpt_out", &[], &[])?;
    eprintln!("xtask demo: the medium config, 3 steps per policy: the memory each policy saves");
    train_all("medium", "3", "train_gpt_out_medium", &[], &[])
}
