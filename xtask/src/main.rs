//! Project tasks: `cargo xtask setup | test | demo | bench`.
//!
//! `setup` installs libtorch (the PyPI wheel `torch==2.13.0`) into a per-user
//! cache shared by every clone and links it as `.libtorch` in the repository,
//! where `.cargo/config.toml` points torch-sys at it. `test` and `demo` run
//! `setup` first, so both work from a fresh clone. `bench` (see `bench()`)
//! also installs the Python peer `torch_remat` into the same venv, and only
//! it does.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The libtorch version that tch 0.26 is written against.
const TORCH_VERSION: &str = "2.13.0";

/// The Python peer the benchmark compares with (PyPI).
const TORCH_REMAT_VERSION: &str = "0.2.0";

type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let outcome = match task {
        "setup" => setup().map(|dir| {
            println!("libtorch {TORCH_VERSION} ready at {}", dir.display());
        }),
        "test" => setup().and_then(|_| test()),
        "demo" => setup().and_then(|_| demo()),
        "bench" => setup().and_then(|torch| bench(&torch, &args[1..])),
        _ => {
            eprintln!(
                "usage: cargo xtask <task>\n\n\
                 tasks:\n  \
                 setup  install libtorch {TORCH_VERSION} (cached per user) and link it as .libtorch\n  \
                 test   setup, then every test, rustfmt and clippy\n  \
                 demo   setup, then run the main example\n  \
                 bench  setup, install torch_remat {TORCH_REMAT_VERSION} into the venv, run \
                 benches/perf against the Python peers and write docs/performance.md \
                 (--quick: a short smoke run)"
            );
            return if task == "help" || task == "--help" {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask {task}: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the repository")
        .to_path_buf()
}

/// `$REMAT_CACHE_DIR`, else `$XDG_CACHE_HOME/remat`, else `~/.cache/remat`.
fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = env::var_os("REMAT_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("remat"));
    }
    let home = env::var_os("HOME")
        .ok_or("neither REMAT_CACHE_DIR, XDG_CACHE_HOME nor HOME is set; set REMAT_CACHE_DIR")?;
    Ok(PathBuf::from(home).join(".cache").join("remat"))
}

/// The `torch/` package folder inside a venv, if the venv has one.
fn torch_dir_in(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    let entries = fs::read_dir(&lib).ok()?;
    entries
        .flatten()
        .map(|e| e.path().join("site-packages").join("torch"))
        .find(|p| p.join("version.py").is_file())
}

/// The version string of a torch package folder, from its `version.py`.
fn torch_version(torch: &Path) -> Option<String> {
    let text = fs::read_to_string(torch.join("version.py")).ok()?;
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("__version__")?;
        let value = rest.trim_start().strip_prefix('=')?.trim();
        Some(value.trim_matches(|c| c == '\'' || c == '"').to_string())
    })
}

fn usable(torch: &Path) -> bool {
    let version_ok = torch_version(torch)
        .map(|v| v == TORCH_VERSION || v.starts_with(&format!("{TORCH_VERSION}+")))
        .unwrap_or(false);
    version_ok && torch.join("lib").join("libtorch_cpu.so").is_file()
}

fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}

fn setup() -> Result<PathBuf> {
    let base = cache_dir()?.join(format!("torch-{TORCH_VERSION}"));
    let venv = base.join("venv");
    let torch = match torch_dir_in(&venv).filter(|t| usable(t)) {
        Some(torch) => torch,
        None => install(&base, &venv)?,
    };
    link_into_repo(&torch)?;
    Ok(torch)
}

fn install(base: &Path, venv: &Path) -> Result<PathBuf> {
    let python = env::var("REMAT_PYTHON").unwrap_or_else(|_| "python3".to_string());
    eprintln!(
        "xtask setup: installing torch=={TORCH_VERSION} from PyPI into {} \
         (about 4.7 GB, once per user)",
        venv.display()
    );
    if venv.exists() {
        // A half-finished or wrong-version install: start over.
        fs::remove_dir_all(venv)
            .map_err(|e| format!("could not remove stale {}: {e}", venv.display()))?;
    }
    fs::create_dir_all(base).map_err(|e| format!("could not create {}: {e}", base.display()))?;
    run(Command::new(&python).args(["-m", "venv"]).arg(venv)).map_err(|e| {
        format!(
            "{e}\n  remat needs `{python} -m venv` (Python 3.10+ with the venv module); \
             set REMAT_PYTHON to another interpreter if needed"
        )
    })?;
    run(Command::new(venv.join("bin").join("python")).args([
        "-m",
        "pip",
        "install",
        "--no-input",
        "--disable-pip-version-check",
        &format!("torch=={TORCH_VERSION}"),
    ]))
    .map_err(|e| format!("{e}\n  the download of torch=={TORCH_VERSION} from PyPI failed"))?;
    let torch = torch_dir_in(venv)
        .ok_or_else(|| format!("pip finished but no torch package is in {}", venv.display()))?;
    if !usable(&torch) {
        return Err(format!(
            "{} holds torch {:?}, not {TORCH_VERSION}",
            torch.display(),
            torch_version(&torch)
        ));
    }
    Ok(torch)
}

/// Points `<repo>/.libtorch` at the cached torch folder (what `.cargo/config.toml` reads).
fn link_into_repo(torch: &Path) -> Result<()> {
    let link = repo_root().join(".libtorch");
    if fs::read_link(&link).ok().as_deref() == Some(torch) {
        return Ok(());
    }
    if link.symlink_metadata().is_ok() {
        fs::remove_file(&link).map_err(|e| format!("could not replace {}: {e}", link.display()))?;
    }
    std::os::unix::fs::symlink(torch, &link)
        .map_err(|e| format!("could not link {}: {e}", link.display()))
}

fn cargo() -> Command {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()));
    cmd.current_dir(repo_root());
    cmd
}

fn test() -> Result<()> {
    let steps: Vec<(&str, Vec<&str>)> = vec![
        (
            "unit, integration and UI tests",
            vec!["test", "--workspace", "--all-targets"],
        ),
        ("doc tests", vec!["test", "--workspace", "--doc"]),
        (
            "the `cuda` feature links and runs",
            vec!["run", "--features", "cuda", "--example", "demo"],
        ),
        ("formatting", vec!["fmt", "--all", "--", "--check"]),
        (
            "clippy",
            vec![
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        ),
    ];
    for (what, args) in &steps {
        eprintln!("xtask test: {what}: cargo {}", args.join(" "));
        run(cargo().args(args))?;
    }
    eprintln!("xtask test: all {} steps passed", steps.len());
    Ok(())
}

fn demo() -> Result<()> {
    run(cargo().args(["run", "--example", "demo"]))
}

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

/// `cargo xtask bench [--quick]`: builds and runs benches/perf, which drives
/// bench/python/peers.py and writes docs/performance.md.
fn bench(torch: &Path, args: &[String]) -> Result<()> {
    let quick = match args {
        [] => false,
        [flag] if flag == "--quick" => true,
        _ => return Err(format!("usage: cargo xtask bench [--quick], not {args:?}")),
    };
    let python = venv_python(torch)?;
    install_torch_remat(&python)?;
    let root = repo_root();
    let command = if quick {
        "cargo xtask bench --quick"
    } else {
        "cargo xtask bench"
    };
    let mut cmd = cargo();
    cmd.args(["bench", "--bench", "perf", "--", "run", "--out"])
        .arg(root.join("docs").join("performance.md"))
        .arg("--python")
        .arg(&python)
        .arg("--script")
        .arg(root.join("bench").join("python").join("peers.py"))
        .args(["--command", command]);
    if quick {
        cmd.arg("--quick");
    }
    run(&mut cmd)
}
