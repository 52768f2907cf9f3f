//! The training example `examples/train_gpt`, a crate outside the workspace
//! built as a user's crate is built (the README's recipe): its cargo, the
//! long run of every policy that `demo` shows and `soak` checks, a run whose
//! output `bench` writes down, and the checks `test` runs on it.

use crate::paths::repo_root;
use crate::run::{cargo, run, stdout_of};
use crate::Result;
use std::path::PathBuf;
use std::process::Command;

/// The training example on the small config, every policy, 2000 steps (what
/// `demo` shows and `soak` checks), writing into `target/<out>`.
pub(crate) fn train_small_all(out: &str, cargo_flags: &[&str], flags: &[&str]) -> Result<()> {
    train_all("small", "2000", out, cargo_flags, flags)
}

/// The training example on `config` under all four policies for `steps`
/// steps, with `flags`, its output in `target/OUT`.
pub(crate) fn train_all(
    config: &str,
    steps: &str,
    out: &str,
    cargo_flags: &[&str],
    flags: &[&str],
) -> Result<()> {
    let out = repo_root().join("target").join(out);
    let out = out.to_str().ok_or("the repository path is not UTF-8")?;
    let args = [
        "--config", config, "--policy", "all", "--steps", steps, "--out", out,
    ];
    run(train_cargo()
        .args(["run", "--release"])
        .args(cargo_flags)
        .arg("--")
        .args(args)
        .args(flags))
}

/// The training example built optimized as `demo` builds it, run in its
/// folder with `flags`: what it printed on standard output (the table and
/// the reports), its standard error (cargo, progress) passed through.
pub(crate) fn train_output(flags: &[&str]) -> Result<String> {
    stdout_of(train_cargo().args(["run", "--release", "--"]).args(flags))
}

/// The training example: a crate outside the workspace, built as a user's
/// crate is built.
fn train_crate() -> PathBuf {
    repo_root().join("examples").join("train_gpt")
}

/// cargo for the training example. It runs in the crate's folder, so that
/// the crate's own `.cargo/config.toml` (the recipe) is read, and without
/// the `LIBTORCH*` values that `cargo xtask` itself inherited from the
/// workspace's config, which would take precedence over the crate's.
/// Its own target folder: the crate names libtorch by another path, which
/// would rebuild the workspace's torch-sys at each switch.
fn train_cargo() -> Command {
    let mut cmd = cargo();
    cmd.current_dir(train_crate())
        .env_remove("LIBTORCH")
        .env_remove("LIBTORCH_CXX11_ABI")
        .env(
            "CARGO_TARGET_DIR",
            repo_root().join("target").join("train_gpt"),
        );
    cmd
}

/// `train_cargo` for `test`'s checks of the training example: its release
/// profile at opt-level 0. The checks are of behaviour (bitwise losses,
/// bytes as predicted, ranks in step), which optimization does not change,
/// and at opt-level 3 the build was most of the part: torch-sys's C++
/// wrapper took 90 s instead of 25 s, and the whole part, cold, 201 s
/// instead of 118 s on the development machine. The artifacts sit beside
/// the optimized ones `demo` builds (cargo keys them by profile settings),
/// so neither rebuilds the other's.
pub(crate) fn train_test_cargo() -> Command {
    let mut cmd = train_cargo();
    cmd.env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0");
    cmd
}

/// Builds the training example through the recipe (unoptimized:
/// `train_test_cargo`), checks its formatting, clippy and unit tests, and
/// trains a few steps under every policy and under a plan for a memory
/// budget, in fp32 and under CPU bf16 autocast, failing unless the losses of
/// all runs of a precision are bitwise equal at every step and the plan's
/// predicted bytes are measured; then trains a few steps on 2 ranks (`--ranks
/// 2 --check`), failing unless the ranks' parameters are bitwise equal after
/// every step.
pub(crate) fn test_train_crate() -> Result<()> {
    let steps: Vec<(&str, Vec<&str>)> = vec![
        (
            "the training example: formatting",
            vec!["fmt", "--", "--check"],
        ),
        (
            "the training example: clippy",
            vec![
                "clippy",
                "--release",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        ),
        (
            "the training example: unit tests",
            vec!["test", "--release"],
        ),
    ];
    for (what, args) in &steps {
        eprintln!("xtask test: {what}: cargo {}", args.join(" "));
        run(train_test_cargo().args(args))?;
    }
    train_smoke("off", "train_gpt_smoke")?;
    train_smoke("bf16", "train_gpt_smoke_bf16")?;
    train_table_smoke()?;
    // Data-parallel (docs/distributed.md): two ranks of train_gpt on this
    // machine over a loopback store, a few steps of `none`, `full` and a
    // plan (the budget lies between full's and none's bytes on a rank's
    // one-row shard), failing unless both ranks hold the same parameters
    // bit for bit after every step and the policies' losses are equal;
    // then the same sharded ("Sharded data parallel"): each block a unit,
    // the ranks' gathered full parameters compared. REMAT_DIST_TIMEOUT
    // bounds every wait for a peer, and a failed rank stops the other, so
    // the step cannot hang.
    let two_ranks = [
        "--ranks",
        "2",
        "--policy",
        "none,full",
        "--budget",
        "250KiB",
        "--steps",
        "4",
        "--threads",
        "1",
    ];
    for (what, out, extra) in [
        (
            "the training example on 2 ranks (Gloo over loopback), parameters bitwise equal \
             across ranks after every step",
            "train_gpt_smoke_ranks",
            None,
        ),
        (
            "the training example sharded on 2 ranks (--fsdp), full parameters bitwise equal \
             across ranks after every step",
            "train_gpt_smoke_fsdp",
            Some("--fsdp"),
        ),
    ] {
        let flags: Vec<&str> = two_ranks.iter().copied().chain(extra).collect();
        train_checked(what, out, &flags, &[("REMAT_DIST_TIMEOUT", "60")])?;
    }
    eprintln!("xtask test: the training example passed");
    Ok(())
}

/// `test_train_crate`'s short `--check`ed run at one `--autocast` precision,
/// into `target/<out>`. 600KiB lies between full's and none's bytes in fp32
/// and in bf16 alike (130 and 678 KiB, 154 and 702 KiB on the small config),
/// so both plans checkpoint a block and keep another whole.
fn train_smoke(autocast: &str, out: &str) -> Result<()> {
    train_checked(
        &format!(
            "the training example, --autocast {autocast}: a short run of every policy and of a \
             plan for a budget between full's and none's bytes, losses bitwise equal, the plan's \
             bytes as predicted"
        ),
        out,
        &[
            "--policy",
            "all",
            "--budget",
            "600KiB",
            "--steps",
            "8",
            "--threads",
            "1",
            "--autocast",
            autocast,
        ],
        &[],
    )
}

/// A `--check`ed release run of the training example on the small config
/// with `flags`, into `target/<out>`, announced as `what`.
fn train_checked(what: &str, out: &str, flags: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let out = repo_root().join("target").join(out);
    let out = out.to_str().ok_or("the repository path is not UTF-8")?;
    let mut args = vec!["run", "--release", "--quiet", "--", "--config", "small"];
    args.extend_from_slice(flags);
    args.extend(["--check", "--out", out]);
    eprintln!("xtask test: {what}: cargo {}", args.join(" "));
    run(train_test_cargo().envs(env.iter().copied()).args(&args))
}

/// `test_train_crate`'s policy-table runs (docs/policies.md): the listing
/// of the model's regions, then `selective` with the table `--save
/// layers.*::attention --offload layers.1::attention` (the same policy as a
/// table, with one layer's attention moved to the CPU instead of kept), a
/// few steps, `--check`ed: losses bitwise equal.
fn train_table_smoke() -> Result<()> {
    let list = ["run", "--release", "--quiet", "--", "--list-regions"];
    eprintln!(
        "xtask test: the training example's region listing: cargo {}",
        list.join(" ")
    );
    run(train_test_cargo().args(list))?;
    train_checked(
        "the training example under a policy table (--save), losses bitwise those of \
         selective, one attention offloaded",
        "train_gpt_smoke_table",
        &[
            "--policy",
            "selective",
            "--save",
            "layers.*::attention",
            "--offload",
            "layers.1::attention",
            "--steps",
            "4",
            "--threads",
            "1",
        ],
        &[],
    )
}
