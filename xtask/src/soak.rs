//! `cargo xtask soak`: the long reliability runs that do not fit `test`
//! (docs/reliability.md).

use crate::leaks::leaks;
use crate::run::{cargo, run};
use crate::train_gpt::train_small_all;
use crate::Result;

/// How many random programs `soak` runs (`test` runs 1000).
const SOAK_PROGRAMS: &str = "20000";

/// The long runs that do not fit `test`: many more random programs (release
/// build), the training example for 2000 steps of every policy (losses
/// bitwise equal at every step, memory flat), and the leak check.
pub(crate) fn soak() -> Result<()> {
    eprintln!("xtask soak: {SOAK_PROGRAMS} random programs (release build)");
    run(cargo()
        .args(["test", "--release", "--test", "programs"])
        .env("REMAT_PROGRAM_CASES", SOAK_PROGRAMS))?;
    eprintln!("xtask soak: the training example, 2000 steps of every policy");
    train_small_all("train_gpt_soak", &["--quiet"], &["--check"])?;
    eprintln!("xtask soak: the test suite's leak check");
    leaks()?;
    eprintln!("xtask soak: passed");
    Ok(())
}
