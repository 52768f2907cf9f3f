//! `cargo xtask bench`: benches/perf against the Python peers, which need
//! `torch_remat` in the venv `setup` made; only this task installs it. Then
//! the training example's runs of docs/training-example.md
//! (`training_doc.rs`), which `--training-example` makes alone.

use crate::paths::repo_root;
use crate::run::{cargo, run};
use crate::training_doc::training_doc;
use crate::{Result, TORCH_REMAT_VERSION};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The venv's Python interpreter (`torch` is `<venv>/lib/pythonX.Y/site-packages/torch`).
fn venv_python(torch: &Path) -> Result<PathBuf> {
    let venv = torch
        .ancestors()
        .nth(4)
        .ok_or_else(|| format!("{} is not inside a venv", torch.display()))?;
    let python = venv.join("bin").join("python");
    if python.is_file() {
        Ok(python)
    } else {
        Err(format!("no interpreter at {}", python.display()))
    }
}

/// Installs `torch_remat` into the venv unless that version is there
/// (`--no-deps`: torch is already the one we link).
fn install_torch_remat(python: &Path) -> Result<()> {
    let probe = Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('torch_remat'))",
        ])
        .output()
        .map_err(|e| format!("could not start {}: {e}", python.display()))?;
    if String::from_utf8_lossy(&probe.stdout).trim() == TORCH_REMAT_VERSION {
        return Ok(());
    }
    eprintln!("xtask bench: installing torch_remat=={TORCH_REMAT_VERSION} into the venv");
    run(Command::new(python).args([
        "-m",
        "pip",
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--no-deps",
        &format!("torch_remat=={TORCH_REMAT_VERSION}"),
    ]))
    .map_err(|e| {
        format!("{e}\n  the download of torch_remat=={TORCH_REMAT_VERSION} from PyPI failed")
    })
}

/// `cargo xtask bench --peak [--quick]`: the planner's peak contract alone,
/// written into docs/planner.md (benches/perf's `peak`; `--quick` leaves
/// the deep config out).
fn peak_doc(args: &[String]) -> Result<()> {
    let quick = match args {
        [] => false,
        [q] if q == "--quick" => true,
        _ => return Err(format!("--peak takes only --quick, not {args:?}")),
    };
    let mut cmd = cargo();
    cmd.args(["bench", "--bench", "perf", "--", "peak", "--docs"])
        .arg(repo_root().join("docs").join("planner.md"));
    if quick {
        cmd.arg("--quick");
    }
    run(&mut cmd)
}

/// `cargo xtask bench [--quick] [--threads N]`: builds and runs
/// benches/perf, which drives bench/python/peers.py and writes
/// docs/performance.md and the peak contract of docs/planner.md; `--threads` is libtorch's intra-op thread count on
/// both sides (default 1). Then, unless `--quick` (a smoke run of the
/// benchmark alone), writes docs/training-example.md. `cargo xtask bench
/// --training-example` writes docs/training-example.md alone.
pub(crate) fn bench(torch: &Path, args: &[String]) -> Result<()> {
    let usage = || {
        format!(
            "usage: cargo xtask bench [--quick] [--threads N] | cargo xtask bench \
             --training-example | cargo xtask bench --peak [--quick], not {args:?}"
        )
    };
    if args.iter().any(|a| a == "--training-example") {
        return if args.len() == 1 {
            training_doc(torch)
        } else {
            Err(usage())
        };
    }
    if args.first().is_some_and(|a| a == "--peak") {
        return peak_doc(&args[1..]).map_err(|e| format!("{e}\n{}", usage()));
    }
    let (mut quick, mut threads) = (false, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--threads" => {
                let n: u32 = it.next().and_then(|n| n.parse().ok()).ok_or_else(usage)?;
                threads = Some(n);
            }
            _ => return Err(usage()),
        }
    }
    let python = venv_python(torch)?;
    install_torch_remat(&python)?;
    let root = repo_root();
    let mut command = "cargo xtask bench".to_string();
    if quick {
        command += " --quick";
    }
    if let Some(n) = threads {
        command += &format!(" --threads {n}");
    }
    let mut cmd = cargo();
    cmd.args(["bench", "--bench", "perf", "--"]);
    if let Some(n) = threads {
        cmd.args(["--threads", &n.to_string()]);
    }
    cmd.args(["run", "--out"])
        .arg(root.join("docs").join("performance.md"))
        .arg("--python")
        .arg(&python)
        .arg("--script")
        .arg(root.join("bench").join("python").join("peers.py"))
        .args(["--command", &command]);
    if quick {
        cmd.arg("--quick");
    }
    run(&mut cmd)?;
    if quick {
        Ok(())
    } else {
        training_doc(torch)
    }
}
