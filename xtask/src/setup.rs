//! `cargo xtask setup` and `env`: libtorch (the PyPI wheel of `torch`) in a
//! venv in the per-user cache, the CUDA headers beside it, the `.libtorch`
//! link that `.cargo/config.toml` reads, and the `.cargo/config.toml` a
//! user's crate needs to build against the same libtorch.

use crate::paths::{cache_dir, repo_root};
use crate::run::run;
use crate::{gloo, Result, CUDA_CCCL, CUDA_CRT, TORCH_VERSION};
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn setup() -> Result<PathBuf> {
    let torch = install_torch(TORCH_VERSION)?;
    link_into_repo(&torch)?;
    gloo::setup(&cache_dir()?, &repo_root())?;
    Ok(torch)
}

/// The `torch/` folder of `torch==version` in its own venv in the cache,
/// installed unless it is there.
pub(crate) fn install_torch(version: &str) -> Result<PathBuf> {
    let base = cache_dir()?.join(format!("torch-{version}"));
    let venv = base.join("venv");
    let torch = match torch_dir_in(&venv).filter(|t| usable(t, version)) {
        Some(torch) => torch,
        None => install(&base, &venv, version)?,
    };
    cuda_headers(&venv, &torch);
    Ok(torch)
}

/// The CUDA headers remat's `cuda` feature compiles its CUDA diagnostics
/// against (csrc/cuda_diag.cpp) and remat_distributed its NCCL process group
/// (csrc/nccl.cpp). The CUDA wheel of torch brings the CUDA runtime's
/// headers (`nvidia/cu13/include`) but not the `crt/` ones they include,
/// which CUDA 13 ships in the small `nvidia-cuda-crt` wheel, nor CCCL's
/// `nv/target`, which `cuda_fp16.h` includes (NCCL's header needs it), in
/// `nvidia-cuda-cccl`: installing them lets a machine without a GPU or
/// toolkit build and test that code too. Best effort: without them the
/// `cuda` feature builds with stubs and without NCCL, saying so.
fn cuda_headers(venv: &Path, torch: &Path) {
    let include = torch.join("../nvidia/cu13/include");
    if !include.join("cuda_runtime_api.h").is_file() {
        return;
    }
    let wheels = [
        (
            CUDA_CRT,
            "crt/host_config.h",
            "CUDA headers, about 130 KB",
            "its CUDA diagnostics as stubs",
        ),
        (
            CUDA_CCCL,
            "nv/target",
            "CCCL headers, about 18 MB",
            "remat_distributed without NCCL",
        ),
    ];
    for (wheel, header, what, otherwise) in wheels {
        if include.join(header).is_file() {
            continue;
        }
        eprintln!("xtask setup: installing {wheel} ({what}) into the venv");
        let installed = run(Command::new(venv.join("bin").join("python")).args([
            "-m",
            "pip",
            "install",
            "--no-input",
            "--no-deps",
            "--disable-pip-version-check",
            wheel,
        ]));
        if let Err(e) = installed {
            eprintln!("xtask setup: warning: {e}; the `cuda` feature will build {otherwise}");
        }
    }
}

fn install(base: &Path, venv: &Path, version: &str) -> Result<PathBuf> {
    let python = env::var("REMAT_PYTHON").unwrap_or_else(|_| "python3".to_string());
    eprintln!(
        "xtask setup: installing torch=={version} from PyPI into {} \
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
        &format!("torch=={version}"),
    ]))
    .map_err(|e| format!("{e}\n  the download of torch=={version} from PyPI failed"))?;
    let torch = torch_dir_in(venv)
        .ok_or_else(|| format!("pip finished but no torch package is in {}", venv.display()))?;
    if !usable(&torch, version) {
        return Err(format!(
            "{} holds torch {:?}, not {version}",
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
pub(crate) fn torch_version(torch: &Path) -> Option<String> {
    let text = fs::read_to_string(torch.join("version.py")).ok()?;
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("__version__")?;
        let value = rest.trim_start().strip_prefix('=')?.trim();
        Some(value.trim_matches(|c| c == '\'' || c == '"').to_string())
    })
}

fn usable(torch: &Path, version: &str) -> bool {
    let version_ok = torch_version(torch)
        .map(|v| v == version || v.starts_with(&format!("{version}+")))
        .unwrap_or(false);
    version_ok && torch.join("lib").join("libtorch_cpu.so").is_file()
}

/// The `.cargo/config.toml` that points a crate's torch-sys at `torch`.
pub(crate) fn user_config(torch: &Path) -> String {
    // The folder the `.gloo` link `setup` made points into (in the cache).
    let gloo = repo_root().join(".gloo").join("include");
    let gloo = fs::canonicalize(&gloo).unwrap_or(gloo);
    format!(
        "# .cargo/config.toml of a crate that depends on remat (from `cargo xtask env`):\n\
         # torch-sys builds against the libtorch {TORCH_VERSION} that `cargo xtask setup`\n\
         # installed. Your build.rs gives binaries an rpath to it (see the README).\n\
         [env]\n\
         LIBTORCH = {:?}\n\
         LIBTORCH_CXX11_ABI = \"1\"\n\
         # Only with remat_distributed (data-parallel training): Gloo's headers, which\n\
         # libtorch does not ship; these are the ones `cargo xtask setup` fetched\n\
         # (or install libgloo-dev and leave this out).\n\
         GLOO_INCLUDE = {:?}\n",
        torch.display().to_string(),
        gloo.display().to_string()
    )
}
