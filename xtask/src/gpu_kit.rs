//! `cargo xtask gpu-kit [--smoke] [--libtorch VERSION|DIR]`: builds, on a
//! machine without a GPU, the folder `target/gpu-kit` that checks remat on
//! someone's GPU machine in one command (docs/gpu.md): the GPU checks
//! (`tests/gpu`), the training example and the bench's per-region chain as
//! stripped release binaries with the `cuda` feature, and `run.sh`, which
//! runs them against the machine's own libtorch and writes `results.md`.
//!
//! Invariant: the kit holds no libtorch and its binaries need only
//! libtorch's own libraries (checked with `readelf -d`): the CUDA runtime
//! they end up using is the one the machine's libtorch was built with.
//! `--smoke` runs the kit here on the CPU (the CUDA checks skip) and fails
//! when its results file records a failure.

use crate::paths::repo_root;
use crate::run::{cargo, run};
use crate::Result;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The libtorch the kit is built against unless `--libtorch` says
/// otherwise: the GPU machine the project borrows has PyTorch
/// 2.11.0+cu130 (docs/gpu.md), and
/// libtorch's sonames carry no version, so binaries built against another
/// release would load its libraries and fail. It is built in the copy that
/// `cargo xtask test --libtorch 2.11` uses, whose lock files hold tch 0.24
/// (libtorch_range.rs).
const DEFAULT_LIBTORCH: &str = "2.11";

/// What the kit is built from: a libtorch, the sources (the repository, or
/// the copy for another libtorch) and a build folder.
struct Source {
    torch: PathBuf,
    root: PathBuf,
    target: PathBuf,
}

/// The kit may not grow past this (what can be carried to the GPU machine).
const MAX_KIT_BYTES: u64 = 60 << 20;

/// What the binaries may load directly: libtorch's libraries and the C and
/// C++ runtimes. A direct `libcudart` would pin a CUDA major version.
const ALLOWED_NEEDED: &[&str] = &[
    "libtorch",
    "libc10",
    "libstdc++",
    "libgcc_s",
    "libc.so",
    "libm.so",
    "libdl.so",
    "libpthread",
    "librt.so",
    "ld-linux",
    "libgomp",
];

/// The smoke run's limit, here on two shared cores.
const SMOKE_SECONDS: &str = "600";

pub fn gpu_kit(args: &[String]) -> Result<()> {
    let smoke = args.iter().any(|a| a == "--smoke");
    let arg = match args.iter().position(|a| a == "--libtorch") {
        Some(i) => args
            .get(i + 1)
            .ok_or("--libtorch needs a version or a folder")?
            .as_str(),
        None => DEFAULT_LIBTORCH,
    };
    let source = source(arg)?;
    let kit = repo_root().join("target").join("gpu-kit");
    build(&source, &kit)?;
    if smoke {
        smoke_run(&kit, &source.torch)?;
    }
    Ok(())
}

/// The sources and build folder for `--libtorch arg`: another version of
/// the supported set (`2.11`) builds in its pinned copy; 2.13 or a folder
/// in the repository itself.
fn source(arg: &str) -> Result<Source> {
    if !repo_root().join(arg).join("lib").is_dir() && !super::TORCH_VERSION.starts_with(arg) {
        let p = crate::libtorch_range::prepare(arg)?;
        return Ok(Source {
            torch: p.torch,
            root: p.copy,
            target: p.target,
        });
    }
    let torch = libtorch_dir(arg)?;
    let version = crate::setup::torch_version(&torch).unwrap_or_else(|| "unknown".into());
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => repo_root()
            .join("target")
            .join(format!("gpu-kit-build-{version}")),
    };
    Ok(Source {
        torch,
        root: repo_root(),
        target,
    })
}

/// The torch folder (headers, `lib/`, `version.py`) for `--libtorch`: a
/// folder as given, or `2.13`/`2.13.0`, the workspace's own set-up
/// (`2.11` goes through [`source`], to its pinned copy).
fn libtorch_dir(arg: &str) -> Result<PathBuf> {
    let as_path = repo_root().join(arg);
    let dir = if as_path.join("lib").is_dir() {
        as_path
    } else if super::TORCH_VERSION.starts_with(arg) {
        crate::setup::setup()?
    } else {
        return Err(format!(
            "--libtorch {arg}: not a libtorch folder (with lib/), and this xtask sets up only \
             {}; give the folder of a torch {arg} package (its `torch/` directory)",
            super::TORCH_VERSION
        ));
    };
    let version = crate::setup::torch_version(&dir).unwrap_or_else(|| "unknown".into());
    eprintln!(
        "xtask gpu-kit: building against torch {version} at {}",
        dir.display()
    );
    Ok(dir)
}

/// Release builds with the `cuda` feature against `torch`, in a target
/// folder of that libtorch's own (torch-sys rebuilds for another one).
fn build(source: &Source, kit: &Path) -> Result<()> {
    let torch = &source.torch;
    require_cuda_headers(torch)?;
    let version = crate::setup::torch_version(torch).unwrap_or_else(|| "unknown".into());
    let target = &source.target;
    let env = |cmd: &mut Command| {
        cmd.current_dir(&source.root)
            .env("LIBTORCH", torch)
            .env("LIBTORCH_CXX11_ABI", "1")
            .env("CARGO_TARGET_DIR", target);
    };
    let mut checks = cargo();
    checks.args([
        "test",
        "--release",
        "--features",
        "cuda",
        "-p",
        "remat",
        "--test",
        "gpu",
        "--no-run",
        "--message-format=json",
    ]);
    env(&mut checks);
    let checks = executable_of(&mut checks, "gpu")?;
    // remat_distributed's multi-rank tests, for the sharded units' GPU
    // check (`fsdp_cuda`: a world of one over NCCL).
    let mut dist = cargo();
    dist.args([
        "test",
        "--release",
        "--features",
        "cuda",
        "-p",
        "remat_distributed",
        "--test",
        "two_ranks",
        "--no-run",
        "--message-format=json",
    ]);
    env(&mut dist);
    let dist = executable_of(&mut dist, "two_ranks")?;
    let mut perf = cargo();
    perf.args([
        "build",
        "--release",
        "--features",
        "cuda",
        "-p",
        "remat",
        "--bench",
        "perf",
        "--message-format=json",
    ]);
    env(&mut perf);
    let perf = executable_of(&mut perf, "perf")?;
    let mut train = cargo();
    env(&mut train);
    train
        .current_dir(source.root.join("examples").join("train_gpt"))
        .args([
            "build",
            "--release",
            "--features",
            "cuda",
            "--message-format=json",
        ]);
    let train = executable_of(&mut train, "train_gpt")?;

    if kit.exists() {
        fs::remove_dir_all(kit).map_err(|e| format!("cannot clear {}: {e}", kit.display()))?;
    }
    let bin = kit.join("bin");
    fs::create_dir_all(&bin).map_err(|e| format!("cannot create {}: {e}", bin.display()))?;
    for (from, name) in [
        (checks, "gpu_checks"),
        (dist, "dist_checks"),
        (perf, "perf"),
        (train, "train_gpt"),
    ] {
        let to = bin.join(name);
        fs::copy(&from, &to).map_err(|e| format!("cannot copy {}: {e}", from.display()))?;
        run(Command::new("strip").arg("--strip-all").arg(&to))?;
        check_needed(&to)?;
    }
    let script = kit.join("run.sh");
    fs::write(&script, include_str!("../gpu-kit/run.sh"))
        .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    run(Command::new("chmod").arg("+x").arg(&script))?;
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(repo_root())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    fs::write(
        kit.join("BUILD"),
        format!("commit {commit}\nbuilt against torch {version}\n"),
    )
    .map_err(|e| format!("cannot write the kit's BUILD file: {e}"))?;
    let bytes = folder_bytes(kit)?;
    eprintln!(
        "xtask gpu-kit: {} ({:.1} MiB); run it with `bash gpu-kit/run.sh` (docs/gpu.md)",
        kit.display(),
        bytes as f64 / (1 << 20) as f64
    );
    if bytes > MAX_KIT_BYTES {
        return Err(format!(
            "the kit is {bytes} bytes, more than the {MAX_KIT_BYTES} it may have"
        ));
    }
    Ok(())
}

/// Without the CUDA headers remat_runtime's build leaves the CUDA
/// diagnostics out (with a warning only), and half the GPU checks would
/// fail on the GPU machine: refuse to build such a kit. The places are the
/// build script's (`cuda_include`): `CUDA_HOME`, the usual toolkit folder,
/// the wheel's `nvidia/*/include` beside `torch/`.
fn require_cuda_headers(torch: &Path) -> Result<()> {
    let mut dirs: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|home| PathBuf::from(home).join("include"))
        .collect();
    dirs.push(PathBuf::from("/usr/local/cuda/include"));
    if let Ok(entries) = fs::read_dir(torch.join("../nvidia")) {
        dirs.extend(entries.flatten().map(|e| e.path().join("include")));
    }
    if dirs.iter().any(|d| d.join("crt/host_config.h").is_file()) {
        return Ok(());
    }
    Err(format!(
        "no CUDA headers for {}: the kit needs remat's CUDA diagnostics; install the wheel \
         {} into that torch's venv (as `cargo xtask setup` does) or set CUDA_HOME",
        torch.display(),
        super::CUDA_CRT
    ))
}

/// Runs a cargo build with `--message-format=json` and returns the
/// executable of the target named `name` from its artifact messages.
fn executable_of(cmd: &mut Command, name: &str) -> Result<PathBuf> {
    let shown = format!("{cmd:?}");
    eprintln!("xtask gpu-kit: {shown}");
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{shown} failed ({})", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        .filter(|l| l.contains(&format!("\"name\":\"{name}\"")))
        .find_map(|l| {
            let rest = l.split("\"executable\":\"").nth(1)?;
            Some(PathBuf::from(&rest[..rest.find('"')?]))
        })
        .ok_or_else(|| format!("{shown} named no executable for {name}"))
}

/// Fails when `binary` needs a shared library other than libtorch's and
/// the C/C++ runtimes. The linker resolves libtorch_cuda's own needs (the
/// CUDA runtime, cuBLAS, ...) through its RUNPATH, in the wheel's `nvidia/`
/// packages, without recording them in the binary; were they not found,
/// `-Wl,--allow-shlib-undefined` would be the way to link anyway.
fn check_needed(binary: &Path) -> Result<()> {
    let out = Command::new("readelf")
        .arg("-d")
        .arg(binary)
        .output()
        .map_err(|e| format!("could not run readelf: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    let foreign: Vec<&&str> = needed
        .iter()
        .filter(|lib| !ALLOWED_NEEDED.iter().any(|ok| lib.starts_with(ok)))
        .collect();
    if !foreign.is_empty() {
        return Err(format!(
            "{} needs {foreign:?} directly; the kit's binaries may need only libtorch's \
             libraries and the C/C++ runtimes",
            binary.display()
        ));
    }
    if !needed.iter().any(|lib| lib.starts_with("libtorch_cuda")) {
        return Err(format!(
            "{} does not link libtorch_cuda: it would see no GPU",
            binary.display()
        ));
    }
    Ok(())
}

fn folder_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let meta = entry.metadata().map_err(|e| e.to_string())?;
        total += if meta.is_dir() {
            folder_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// Runs the kit here on the CPU (`run.sh --smoke`) and fails unless its
/// results file records no failure. run.sh finds libtorch as on a GPU
/// machine, through `python3`: the venv that holds `torch` comes first on
/// `PATH` (`torch` is `VENV/lib/pythonX.Y/site-packages/torch`); a torch
/// folder outside a venv is named by `REMAT_TORCH_LIB` instead.
fn smoke_run(kit: &Path, torch: &Path) -> Result<()> {
    let results = kit.join("results").join("results.md");
    let mut cmd = Command::new("timeout");
    cmd.args([SMOKE_SECONDS, "bash"])
        .arg(kit.join("run.sh"))
        .arg("--smoke");
    // Canonical first: Python finds its venv from its own path, read as
    // written, and `..` after the `.libtorch` link would leave the venv.
    let real = fs::canonicalize(torch).unwrap_or_else(|_| torch.to_path_buf());
    let venv_bin = real.join("../../../../bin");
    if venv_bin.join("python3").is_file() {
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", venv_bin.display()));
    } else {
        cmd.env("REMAT_TORCH_LIB", torch.join("lib"));
    }
    run(&mut cmd)?;
    let text = fs::read_to_string(&results)
        .map_err(|e| format!("the smoke run wrote no {}: {e}", results.display()))?;
    let failed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("| fail") || l.contains("| FAIL"))
        .collect();
    if !failed.is_empty() {
        return Err(format!(
            "the smoke run recorded failures in {}:\n{}",
            results.display(),
            failed.join("\n")
        ));
    }
    if !text.contains("skipped: no CUDA device") && !tch_cuda_visible(&text) {
        return Err(format!(
            "{} records no skipped CUDA check on this CPU machine",
            results.display()
        ));
    }
    eprintln!(
        "xtask gpu-kit: smoke run green, results in {}",
        results.display()
    );
    Ok(())
}

/// Whether the results say the run saw a GPU (then nothing skips).
fn tch_cuda_visible(results: &str) -> bool {
    results.lines().any(|l| l.starts_with("- device: cuda"))
}
