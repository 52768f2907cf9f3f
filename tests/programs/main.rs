//! Random region trees: checkpoint bodies no one wrote by hand, generated
//! from the runtime API (nested checkpoints, regions of random policies,
//! elementwise, matmul, view, in-place and reduction ops, tuple outputs,
//! state hooks, checkpoints whose inputs are views or shared), each run with
//! remat under strict recomputation and without it: every leaf's gradient must be
//! bitwise equal, and no checkpoint state may outlive the graph.
//!
//! A test binary of its own: it reads the process-wide count of live
//! checkpoints. `REMAT_PROGRAM_CASES` sets the number of cases (default
//! 1000; `cargo xtask soak` runs more). Shrunk failures become ordinary
//! tests in `regressions.rs`.

mod program;
mod regressions;

use program::{check, program};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn cases() -> u32 {
    std::env::var("REMAT_PROGRAM_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

#[test]
// docs/semantics.md, rules C6, C15, K1-K7, P4 and P5, on random programs; M3.
fn random_programs_match_plain_autograd_bitwise() {
    tch::set_num_threads(1);
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&program(), |p| {
        check(&p).map_err(TestCaseError::fail)?;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
