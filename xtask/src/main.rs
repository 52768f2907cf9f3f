//! Project tasks: `cargo xtask setup | env | test | package | demo | bench | soak | leaks | guarantee | gpu-kit`.
//!
//! `setup` installs libtorch (the PyPI wheel `torch==2.13.0`) into a per-user
//! cache shared by every clone and links it as `.libtorch` in the repository,
//! where `.cargo/config.toml` points torch-sys at it; likewise Gloo's headers
//! for remat_distributed (`gloo.rs`), linked as `.gloo`. `env` prints the
//! `.cargo/config.toml` a crate of yours needs (the README's recipe). `test`
//! and `demo` run `setup` first, so both work from a fresh clone; both build
//! the training example `examples/train_gpt`, a crate of its own that follows
//! the recipe. `bench` (see `bench()`) also installs the Python peer
//! `torch_remat` into the same venv, and only it does. `soak` runs the long
//! reliability checks, `leaks` the leak check alone. `package` checks that
//! the crates as `cargo publish` would upload them build and run for a user
//! (`package.rs`); `test` runs it last. `test --libtorch 2.11` runs the
//! same tests against libtorch 2.11 (tch 0.24) in a copy of the repository
//! whose lock file alone differs (`libtorch_range.rs`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod gloo;
mod gpu_kit;
mod guarantee;
mod libtorch_range;
mod package;
mod timing;

/// The libtorch version that tch 0.26 is written against.
const TORCH_VERSION: &str = "2.13.0";

/// The Python peer the benchmark compares with (PyPI).
const TORCH_REMAT_VERSION: &str = "0.2.0";

/// The CUDA `crt/` headers matching the CUDA 13.0 wheels of torch 2.13.0
/// and 2.11.0 (both bring nvidia-cuda-runtime 13.0.96).
const CUDA_CRT: &str = "nvidia-cuda-crt==13.0.88";
/// CCCL of the same CUDA 13.0 (`nv/target`, for NCCL's header).
const CUDA_CCCL: &str = "nvidia-cuda-cccl==13.0.85";

pub(crate) type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let outcome = match task {
        "setup" => setup().map(|dir| {
            println!("libtorch {TORCH_VERSION} ready at {}", dir.display());
        }),
        "env" => setup().map(|dir| print!("{}", user_config(&dir))),
        "test" if args.get(1).map(String::as_str) == Some("--libtorch") => {
            libtorch_range::test(&args[2..])
        }
        // What `test --libtorch` runs in its copy of the repository, whose
        // libtorch is set up already.
        "test-suite" => {
            let outcome =
                test().and_then(|_| timing::part("the training example", test_train_crate));
            timing::print_table();
            outcome
        }
        "test" => {
            let outcome = timing::part("libtorch's set-up", setup)
                .and_then(|_| test())
                .and_then(|_| timing::part("the training example", test_train_crate))
                .and_then(|_| timing::part("a panic = \"abort\" crate", test_abort_crate))
                // The rust-version check installs a second toolchain (minutes
                // on a fresh machine): `cargo xtask package` runs it, `test`
                // skips it unless REMAT_MSRV=1.
                .and_then(|_| {
                    timing::part("the packages", || {
                        package::package(std::env::var_os("REMAT_MSRV").is_some())
                    })
                });
            timing::print_table();
            outcome
        }
        "package" => setup().and_then(|_| package::package(true)),
        "demo" => setup().and_then(|_| demo()),
        "leaks" => setup().and_then(|_| leaks()),
        "soak" => setup().and_then(|_| soak()),
        "bench" => setup().and_then(|torch| bench(&torch, &args[1..])),
        "gpu-kit" => gpu_kit::gpu_kit(&args[1..]),
        "guarantee" => guarantee::guarantee(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask <task>\n\n\
                 tasks:\n  \
                 setup  install libtorch {TORCH_VERSION} (cached per user) and link it as .libtorch\n  \
                 env    setup, then print the .cargo/config.toml of a crate that uses remat\n  \
                 test   setup, then every test, rustfmt and clippy, the training example \
                 and `package` (without its rust-version check unless REMAT_MSRV=1)\n  \
                 test --libtorch 2.11  the same tests and training example against libtorch \
                 2.11 (tch 0.24), in its own venv and target folder\n  \
                 package  package the three crates, build and run a fresh crate with \
                 `remat = \"0.1\"` against them, build their docs as docs.rs does, check \
                 them with the rust-version's compiler\n  \
                 demo   setup, then train the reference model under each policy\n  \
                 bench  setup, install torch_remat {TORCH_REMAT_VERSION} into the venv, run \
                 benches/perf against the Python peers and write docs/performance.md \
                 (--quick: a short smoke run; --threads N: intra-op threads, default 1)\n  \
                 leaks  setup, then the leak check alone (part of `test`)\n  \
                 soak   setup, then the long reliability runs (docs/reliability.md)\n  \
                 guarantee  random programs against the compile-time guarantee: every one \
                 runs clean under strict recomputation, every one with a mark taken away \
                 fails to compile (--seed S --count N: another round; --out DIR: only \
                 write the files)\n  \
                 gpu-kit  build target/gpu-kit, which checks remat on a GPU machine \
                 (docs/gpu.md); --smoke: run it here on the CPU; --libtorch VERSION|DIR: \
                 the libtorch to build against"
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
pub(crate) fn cache_dir() -> Result<PathBuf> {
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

fn usable(torch: &Path, version: &str) -> bool {
    let version_ok = torch_version(torch)
        .map(|v| v == version || v.starts_with(&format!("{version}+")))
        .unwrap_or(false);
    version_ok && torch.join("lib").join("libtorch_cpu.so").is_file()
}

pub(crate) fn run(cmd: &mut Command) -> Result<()> {
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
    let torch = install_torch(TORCH_VERSION)?;
    link_into_repo(&torch)?;
    gloo::setup(&cache_dir()?, &repo_root())?;
    Ok(torch)
}

/// The `torch/` folder of `torch==version` in its own venv in the cache,
/// installed unless it is there.
fn install_torch(version: &str) -> Result<PathBuf> {
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

fn cargo() -> Command {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()));
    cmd.current_dir(repo_root());
    cmd
}

/// One step of `cargo xtask test`: what it checks, the cargo arguments, and
/// environment variables for it.
struct Step {
    what: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

const TEST_STEPS: &[Step] = &[
    Step {
        what: "unit, integration and UI tests",
        args: &["test", "--workspace", "--all-targets"],
        env: &[],
    },
    Step {
        what: "doc tests",
        args: &["test", "--workspace", "--doc"],
        env: &[],
    },
    Step {
        // Strict recomputation serves a placeholder for every `save` output nobody
        // asked for, so a missing `needs` fails even where autograd happens
        // to keep the value.
        what: "the macro tests under strict recomputation",
        // `--workspace`, as the first step: the same features unified over
        // the members, so the same binary, not a rebuild of the root.
        args: &["test", "--workspace", "--test", "macros"],
        env: &[("REMAT_STRICT_RECOMPUTE", "1")],
    },
    Step {
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
    Step {
        what: "the demo with the `cuda` feature",
        args: &["run", "--features", "cuda", "--example", "demo"],
        env: &[],
    },
    Step {
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
    Step {
        what: "formatting",
        args: &["fmt", "--all", "--", "--check"],
        env: &[],
    },
    Step {
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
    Step {
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

fn test() -> Result<()> {
    for step in TEST_STEPS {
        if step.what == "formatting" {
            // Before the lints: the leak check reruns test binaries.
            timing::part("the leak check", leaks)?;
        }
        let env: Vec<String> = step.env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        eprintln!(
            "xtask test: {}: {}cargo {}",
            step.what,
            env.concat(),
            step.args.join(" ")
        );
        timing::part(step.what, || {
            run(cargo().args(step.args).envs(step.env.iter().copied()))
        })?;
    }
    eprintln!("xtask test: all {} steps passed", TEST_STEPS.len());
    Ok(())
}

/// The test binaries the leak check runs: the runtime's behaviour, the
/// bridge, the random programs and the long steady-state run.
const LEAK_CHECKED: &[&str] = &["runtime", "bridge", "programs", "steady_memory"];

/// Where the system's LeakSanitizer runtime is (Debian's `liblsan0`).
fn liblsan() -> Result<PathBuf> {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/liblsan.so.0",
        "/usr/lib/aarch64-linux-gnu/liblsan.so.0",
        "/usr/lib64/liblsan.so.0",
    ];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "the leak check needs LeakSanitizer's runtime (liblsan.so.0): \
             `apt-get install liblsan0` on Debian"
                .to_string()
        })
}

/// Builds the test binaries and returns their paths, by name.
fn test_executables(names: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let mut cmd = cargo();
    // `--workspace`: the binaries the first step built and ran (the
    // members' features unified alike), not a rebuild.
    cmd.args(["test", "--workspace", "--no-run", "--message-format=json"]);
    for name in names {
        cmd.args(["--test", name]);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the test binaries failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut found = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.split("\"executable\":\"").nth(1) else {
            continue;
        };
        let path = rest.split('"').next().unwrap_or_default();
        let name = names
            .iter()
            .find(|n| line.contains(&format!("\"name\":\"{n}\"")));
        if let Some(name) = name {
            found.push((name.to_string(), PathBuf::from(path)));
        }
    }
    if found.len() != names.len() {
        return Err(format!(
            "found {} of {} test binaries",
            found.len(),
            names.len()
        ));
    }
    Ok(found)
}

/// Runs test binaries under LeakSanitizer (preloaded: no rebuild), after
/// checking on a canary that leaks on purpose that the set-up catches one.
fn leaks() -> Result<()> {
    let lsan = liblsan()?;
    let supp = repo_root().join("lsan.supp");
    let options = format!("exitcode=23:suppressions={}", supp.display());
    let mut names = LEAK_CHECKED.to_vec();
    names.push("lsan_canary");
    let bins = test_executables(&names)?;
    for (name, bin) in &bins {
        let canary = name == "lsan_canary";
        eprintln!("xtask test: leak check of `{name}` under LeakSanitizer");
        let mut cmd = Command::new(bin);
        cmd.current_dir(repo_root())
            .env("LD_PRELOAD", &lsan)
            .env("LSAN_OPTIONS", &options);
        if canary {
            cmd.env("REMAT_LSAN_CANARY", "1")
                .stderr(std::process::Stdio::null());
        }
        let status = cmd
            .status()
            .map_err(|e| format!("could not run {}: {e}", bin.display()))?;
        match (canary, status.code()) {
            (true, Some(23)) => {}
            (true, _) => {
                return Err(format!(
                    "LeakSanitizer did not catch the canary's leak ({status}): the leak \
                     check would prove nothing"
                ))
            }
            (false, Some(0)) => {}
            (false, _) => {
                return Err(format!(
                    "`{name}` failed under LeakSanitizer ({status}); a leak report is above"
                ))
            }
        }
    }
    Ok(())
}

/// How many random programs `soak` runs (`test` runs 1000).
const SOAK_PROGRAMS: &str = "20000";

/// The long runs that do not fit `test`: many more random programs (release
/// build), the training example for 2000 steps of every policy (losses
/// bitwise equal at every step, memory flat), and the leak check.
fn soak() -> Result<()> {
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

/// The training example on the small config under all four policies: the
/// table, one block's memory report and the plots (in `target/train_gpt_out`).
fn demo() -> Result<()> {
    eprintln!("xtask demo: building and running examples/train_gpt (a crate of its own)");
    train_small_all("train_gpt_out", &[], &[])
}

/// The training example on the small config, every policy, 2000 steps (what
/// `demo` shows and `soak` checks), writing into `target/<out>`.
fn train_small_all(out: &str, cargo_flags: &[&str], flags: &[&str]) -> Result<()> {
    let out = repo_root().join("target").join(out);
    let out = out.to_str().ok_or("the repository path is not UTF-8")?;
    let args = [
        "--config", "small", "--policy", "all", "--steps", "2000", "--out", out,
    ];
    run(train_cargo()
        .args(["run", "--release"])
        .args(cargo_flags)
        .arg("--")
        .args(args)
        .args(flags))
}

/// The `.cargo/config.toml` that points a crate's torch-sys at `torch`.
fn user_config(torch: &Path) -> String {
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
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()));
    cmd.current_dir(train_crate())
        .env_remove("LIBTORCH")
        .env_remove("LIBTORCH_CXX11_ABI")
        .env(
            "CARGO_TARGET_DIR",
            repo_root().join("target").join("train_gpt"),
        );
    cmd
}

/// A user's crate built with `panic = "abort"` (tests/abort_crate):
/// checkpointed backwards with every switch asking for early stop complete,
/// since such a build never stops a recomputation (docs/semantics.md, rule
/// C18). Built as `train_test_cargo` builds (the recipe, opt-level 0), in
/// the training example's target folder: the same libtorch path, so only
/// what the abort strategy changes is compiled again.
fn test_abort_crate() -> Result<()> {
    let dir = repo_root().join("tests").join("abort_crate");
    eprintln!(
        "xtask test: a panic = \"abort\" crate: cargo run --release (in {})",
        dir.display()
    );
    let mut cmd = train_test_cargo();
    cmd.current_dir(dir).args(["run", "--release", "--locked"]);
    run(&mut cmd)
}

/// `train_cargo` for `test`'s checks of the training example: its release
/// profile at opt-level 0. The checks are of behaviour (bitwise losses,
/// bytes as predicted, ranks in step), which optimization does not change,
/// and at opt-level 3 the build was most of the part: torch-sys's C++
/// wrapper took 90 s instead of 25 s, and the whole part, cold, 201 s
/// instead of 118 s on the development machine. The artifacts sit beside
/// the optimized ones `demo` builds (cargo keys them by profile settings),
/// so neither rebuilds the other's.
fn train_test_cargo() -> Command {
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
fn test_train_crate() -> Result<()> {
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
    // bit for bit after every step and the policies' losses are equal.
    // REMAT_DIST_TIMEOUT bounds every wait for a peer, and a failed rank
    // stops the other, so the step cannot hang.
    train_checked(
        "the training example on 2 ranks (Gloo over loopback), parameters bitwise equal across \
         ranks after every step",
        "train_gpt_smoke_ranks",
        &[
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
        ],
        &[("REMAT_DIST_TIMEOUT", "60")],
    )?;
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

/// `cargo xtask bench [--quick] [--threads N]`: builds and runs
/// benches/perf, which drives bench/python/peers.py and writes
/// docs/performance.md; `--threads` is libtorch's intra-op thread count on
/// both sides (default 1).
fn bench(torch: &Path, args: &[String]) -> Result<()> {
    let usage = || format!("usage: cargo xtask bench [--quick] [--threads N], not {args:?}");
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
    run(&mut cmd)
}
