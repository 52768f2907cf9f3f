//! `cargo xtask demo`: the reference model trained under each policy, by
//! the training example built optimized (`train_gpt.rs`), which `test`'s
//! checks of it are not.

use crate::train_gpt::train_small_all;
use crate::Result;

/// The training example on the small config under all four policies: the
/// table, one block's memory report and the plots (in `target/train_gpt_out`).
pub(crate) fn demo() -> Result<()> {
    eprintln!("xtask demo: building and running examples/train_gpt (a crate of its own)");
    train_small_all("train_gpt_out", &[], &[])
}
