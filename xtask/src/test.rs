//! `cargo xtask test`: the steps it runs in the workspace, in order, and the
//! `panic = "abort"` crate it builds beside them; the training example's
//! checks are in `train_gpt.rs`.

use crate::leaks::leaks;
use crate::paths::repo_root;
use crate::run::{cargo, run};
use crate::train_gpt::train_test_cargo;
use crate::walkthrough::walkthrough;
use crate::{timing, Result};

/// One step of `cargo xtask test`.
enum Step {
    /// What it checks, the cargo arguments, and environment variables for it.
    Cargo {
        what: &'static str,
        args: &'static [&'static str],
        env: &'static [(&'static str, &'static str)],
    },
    /// The leak check (`leaks.rs`). It reports each binary it reruns
    /// itself, so the closing line counts only the cargo steps.
    LeakCheck,
    /// The walk-through's files against the files its scenario runs
    /// (`walkthrough.rs`), likewise on a binary the first step built.
    Walkthrough,
}

const TEST_STEPS: &[Step] = &[
    Step::Cargo {
        what: "unit, integration and UI tests",
        args: &["test", "--workspace", "--all-targets"],
        env: &[],
    },
    Step::Cargo {
        what: "doc tests",
        args: &["test", "--workspace", "--doc"],
        env: &[],
    },
    Step::Cargo {
        // Strict recomputation serves a placeholder for every `save` output nobody
        // asked for, so a missing `needs` fails even where autograd happens
        // to keep the value.
        what: "the macro tests under strict recomputation",
        // `--workspace`, as the first step: the same features unified over
        // the members, so the same binary, not a rebuild of the root.
        args: &["test", "--workspace", "--test", "macros"],
        env: &[("REMAT_STRICT_RECOMPUTE", "1")],
    },
    Step::Cargo {
        // Links libtorch_cuda: the runtime's tests must pass with it too
        // (on a GPU machine they then see CUDA devices).
        what: "the runtime tests with the `cuda` feature",
        args: &[
            "test",
            "--features",
            "cuda",
            "--test",
            "runtime",
            "--test",
            "bridge",
        ],
        env: &[],
    },
    Step::Cargo {
        what: "the demo with the `cuda` feature",
        args: &["run", "--features", "cuda", "--example", "demo"],
        env: &[],
    },
    Step::Cargo {
        // Every doc comment, private items included, with its intra-doc
        // links resolved: a link to an item that moved or was renamed fails
        // here, not in a reader's browser.
        what: "the docs of every item, broken links denied",
        args: &[
            "doc",
            "--workspace",
            "--no-deps",
            "--document-private-items",
        ],
        env: &[("RUSTDOCFLAGS", "-D warnings")],
    },
    // Before the lints: the leak check reruns test binaries.
    Step::LeakCheck,
    Step::Walkthrough,
    Step::Cargo {
        what: "formatting",
        args: &["fmt", "--all", "--", "--check"],
        env: &[],
    },
    Step::Cargo {
        what: "clippy",
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        env: &[],
    },
    Step::Cargo {
        // The `cuda` feature changes no Rust item: the crates test it only
        // with `cfg!(..)`, a boolean, so both branches compile and the
        // clippy step above lints them. What it changes is the C++ built:
        // the runtime's CUDA diagnostics, which the cuda test step above
        // builds, and remat_distributed's NCCL process group, which this
        // step compiles (a check runs build scripts too). Clippy of both
        // crates under `cuda` took 148 s of CI for the same lints.
        what: "remat_distributed with the `cuda` feature (its NCCL bridge)",
        args: &[
            "check",
            "-p",
            "remat_distributed",
            "--all-targets",
            "--features",
            "cuda",
        ],
        env: &[],
    },
];

pub(crate) fn test() -> Result<()> {
    for step in TEST_STEPS {
        match step {
            Step::LeakCheck => timing::part("the leak check", leaks)?,
            Step::Walkthrough => timing::part("the walk-through's files", walkthrough)?,
            Step::Cargo { what, args, env } => {
                let shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
                eprintln!(
                    "xtask test: {what}: {}cargo {}",
                    shown.concat(),
                    args.join(" ")
                );
                timing::part(what, || run(cargo().args(*args).envs(env.iter().copied())))?;
            }
        }
    }
    let cargo_steps = TEST_STEPS
        .iter()
        .filter(|step| matches!(step, Step::Cargo { .. }))
        .count();
    eprintln!("xtask test: all {cargo_steps} steps passed");
    Ok(())
}

/// A user's crate built with `panic = "abort"` (tests/abort_crate):
/// checkpointed backwards stop their recomputations early there too, with a
/// `Mutex` guard held across the stop, since the stop unwinds nothing
/// (docs/semantics.md, rules C17 and C18). Built as `train_test_cargo` builds (the recipe, opt-level 0), in
/// the training example's target folder: the same libtorch path, so only
/// what the abort strategy changes is compiled again.
pub(crate) fn test_abort_crate() -> Result<()> {
    let dir = repo_root().join("tests").join("abort_crate");
    eprintln!(
        "xtask test: a panic = \"abort\" crate: cargo run --release (in {})",
        dir.display()
    );
    let mut cmd = train_test_cargo();
    cmd.current_dir(dir).args(["run", "--release", "--locked"]);
    run(&mut cmd)
}
