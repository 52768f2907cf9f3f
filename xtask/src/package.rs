//! `cargo xtask package`: what `cargo publish` would upload builds and runs
//! for a user who has only the packages and libtorch.
//!
//! The three crates are packaged as crates.io would receive them, unpacked,
//! and a fresh crate (`xtask/fresh/`) that asks for `remat = "0.1"` is built
//! and run against them through `[patch.crates-io]`: no path dependency of
//! the workspace, no file of the clone outside the packages. The fresh crate
//! and the unpacked packages live outside the repository (in the per-user
//! cache), so that no `.cargo/config.toml` of the clone applies to them;
//! only the environment does (`LIBTORCH`, `LIBTORCH_CXX11_ABI`, as the
//! README tells users). Then each package's docs are built as docs.rs builds
//! them, with no libtorch in the environment and warnings denied, and the
//! crates are type-checked with the oldest compiler `rust-version` claims.
//!
//! Builds stay cheap on a second run: the fresh crate's final outputs go to
//! `<target>/package-check`, but its intermediate artifacts share the
//! workspace's build folder (`CARGO_BUILD_BUILD_DIR`), so registry
//! dependencies the workspace compiled (tch, torch-sys and its C++ wrapper)
//! are reused. That holds only while their environment is the workspace's:
//! `LIBTORCH` is passed through unchanged, since a different value would
//! rerun torch-sys's build script and so rebuild the workspace's too. The
//! packages are unpacked file by file, writing only what changed, because
//! `.crate` archives carry one fixed timestamp and cargo judges path
//! dependencies fresh by timestamps.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{cache_dir, repo_root};
use crate::run::{cargo, run};
use crate::Result;

/// The published crates, in the order `cargo package` needs them.
const CRATES: &[&str] = &["remat_derive", "remat_runtime", "remat"];

/// The workspace's version, which every published crate has.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Files each package must ship, and path prefixes none may.
const MUST_SHIP: &[(&str, &[&str])] = &[
    ("remat_derive", &["LICENSE", "README.md", "src/lib.rs"]),
    (
        "remat_runtime",
        &[
            "LICENSE",
            "README.md",
            "build.rs",
            "build/libtorch.rs",
            "csrc/bridge.cpp",
            "csrc/bridge.h",
            "csrc/guard.h",
            "csrc/autocast.cpp",
            "csrc/cuda_diag.cpp",
        ],
    ),
    (
        "remat",
        &[
            "LICENSE",
            "README.md",
            "CHANGELOG.md",
            "build.rs",
            "src/lib.rs",
        ],
    ),
];
const MUST_NOT_SHIP: &[&str] = &[
    "tests/",
    "src/tests/",
    "benches/",
    "examples/",
    "ui-tests/",
    "reference/",
    "xtask/",
    "docs/",
    "target/",
    ".libtorch",
    ".cargo/",
    ".ci/",
];

/// The fresh crate, as files to write (path, contents).
const FRESH: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../fresh/Cargo.toml.in")),
    ("build.rs", include_str!("../fresh/build.rs")),
    ("src/main.rs", include_str!("../fresh/src/main.rs")),
];

/// The fresh crate's Rust sources, for rustfmt.
const FRESH_SOURCES: &[&str] = &["build.rs", "src/main.rs"];

/// A crate that depends on one package with its docs.rs features, one per
/// package: cargo takes no `--features` for a package outside the
/// workspace, and one crate for all three would unify their features.
const DOCS: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../fresh/docs.Cargo.toml.in")),
    ("src/lib.rs", "//! Only here to build the packages' docs.\n"),
];

/// `rust_version`: also type-check with the compiler `rust-version` names.
pub fn package(rust_version: bool) -> Result<()> {
    let root = repo_root();
    let dirs = Dirs::of_workspace()?;
    let scratch = cache_dir()?.join("package-check").join(clone_id(&root));
    let crates = scratch.join("crates");
    pack(&dirs, &scratch, &crates)?;
    let lock = fs::read_to_string(root.join("Cargo.lock"))
        .map_err(|e| format!("could not read Cargo.lock: {e}"))?;
    let toolchain = toolchain_channel(&root)?;
    run_fresh(&root, &dirs, &scratch, &crates, &lock, &toolchain)?;
    for name in CRATES {
        build_docs(name, &dirs, &scratch, &crates, &lock, &toolchain)?;
    }
    if rust_version {
        check_rust_version(&root, &dirs, &scratch, &crates)?;
    } else {
        eprintln!(
            "xtask package: rust-version check skipped (`cargo xtask package` runs it, or \
             REMAT_MSRV=1 cargo xtask test)"
        );
    }
    eprintln!("xtask package: passed");
    Ok(())
}

/// `cargo package` for the three crates, each package checked and
/// unpacked into `crates`.
fn pack(dirs: &Dirs, scratch: &Path, crates: &Path) -> Result<()> {
    eprintln!("xtask package: cargo package (no verify: the fresh crate below is the check)");
    let mut cmd = cargo();
    cmd.args(["package", "--no-verify", "--allow-dirty"]);
    for name in CRATES {
        cmd.args(["-p", name]);
    }
    run(&mut cmd)?;
    let staging = scratch.join("staging");
    remove_dir(&staging)?;
    fs::create_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    for name in CRATES {
        let file = dirs
            .target
            .join("package")
            .join(format!("{name}-{VERSION}.crate"));
        run(Command::new("tar")
            .arg("-xzf")
            .arg(&file)
            .arg("-C")
            .arg(&staging))?;
        let dir = format!("{name}-{VERSION}");
        check_contents(name, &staging.join(&dir))?;
        sync(&staging.join(&dir), &crates.join(&dir))?;
    }
    remove_dir(&staging)
}

/// Builds, runs and lints the fresh crate against the packages.
fn run_fresh(
    root: &Path,
    dirs: &Dirs,
    scratch: &Path,
    crates: &Path,
    lock: &str,
    toolchain: &str,
) -> Result<()> {
    let fresh = scratch.join("fresh");
    write_crate(&fresh, FRESH, &[], crates, Some(lock))?;
    // Outside the workspace, so `cargo fmt --all` and clippy miss it.
    run(Command::new("rustfmt")
        .current_dir(root)
        .args(["--check", "--edition", "2021"])
        .args(
            FRESH_SOURCES
                .iter()
                .map(|f| root.join("xtask/fresh").join(f)),
        ))?;
    eprintln!(
        "xtask package: building and running a fresh crate with `remat = \"{VERSION}\"` from \
         the packages ({})",
        fresh.display()
    );
    run(fresh_cargo(&fresh, toolchain, dirs)
        .args(["run", "--quiet"])
        .env("CARGO_TARGET_DIR", dirs.checks()))?;
    run(fresh_cargo(&fresh, toolchain, dirs)
        .args(["clippy", "--quiet", "--all-targets", "--", "-D", "warnings"])
        .env("CARGO_TARGET_DIR", dirs.checks()))
}

/// One package's docs as docs.rs builds them: its docs.rs features, no
/// libtorch anywhere in the environment, warnings denied.
fn build_docs(
    name: &str,
    dirs: &Dirs,
    scratch: &Path,
    crates: &Path,
    lock: &str,
    toolchain: &str,
) -> Result<()> {
    let features = docs_rs_features(&crates.join(format!("{name}-{VERSION}")))?;
    eprintln!(
        "xtask package: the docs of {name} as docs.rs builds them (features {features:?}, \
         no libtorch, RUSTDOCFLAGS=-D warnings)"
    );
    let docs = scratch.join(format!("docs-{name}"));
    let list: Vec<String> = features.iter().map(|f| format!("{f:?}")).collect();
    let vars = [
        ("@NAME@", name),
        ("@FEATURES@", &list.join(", ")),
        ("@PATCH@", &patch_lines(name, crates)),
    ];
    write_crate(&docs, DOCS, &vars, crates, Some(lock))?;
    let mut cmd = fresh_cargo(&docs, toolchain, dirs);
    cmd.args(["doc", "--no-deps", "--lib", "-p", name])
        .env("CARGO_TARGET_DIR", dirs.checks())
        .env("DOCS_RS", "1")
        .env("RUSTDOCFLAGS", "--cfg docsrs -D warnings");
    for var in LIBTORCH_VARS {
        cmd.env_remove(var);
    }
    run(&mut cmd)
}

/// Type-checks the packages and the fresh crate with the compiler that
/// `rust-version` names (installed with rustup if missing), without
/// libtorch (`doc-only`: the check is of the Rust code).
fn check_rust_version(root: &Path, dirs: &Dirs, scratch: &Path, crates: &Path) -> Result<()> {
    let msrv = rust_version(root)?;
    ensure_toolchain(&msrv)?;
    eprintln!(
        "xtask package: type-checking the packages and the fresh crate with Rust {msrv} \
         (the workspace's rust-version), without libtorch (`doc-only`)"
    );
    // A user on that compiler gets the dependency versions that support it
    // (the workspace's lock file has newer ones), so this crate resolves
    // afresh, as cargo does for such a user.
    let old = scratch.join("msrv");
    write_crate(&old, FRESH, &[], crates, None)?;
    let mut cmd = fresh_cargo(&old, &msrv, dirs);
    cmd.args(["check", "--features", "remat/doc-only"])
        .env("CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS", "fallback")
        // Older cargo knows no build-dir: it gets a target folder of its own.
        .env_remove("CARGO_BUILD_BUILD_DIR")
        .env("CARGO_TARGET_DIR", dirs.checks().join("msrv"));
    for var in LIBTORCH_VARS {
        cmd.env_remove(var);
    }
    run(&mut cmd)
}

/// Every variable through which torch-sys and remat find libtorch.
const LIBTORCH_VARS: &[&str] = &[
    "LIBTORCH",
    "LIBTORCH_CXX11_ABI",
    "LIBTORCH_USE_PYTORCH",
    "LIBTORCH_INCLUDE",
    "LIBTORCH_LIB",
    "LIBTORCH_STATIC",
];

/// The workspace's target and build folders, as cargo resolves them.
struct Dirs {
    target: PathBuf,
    build: PathBuf,
}

impl Dirs {
    fn of_workspace() -> Result<Dirs> {
        let out = cargo()
            .args(["metadata", "--format-version", "1", "--no-deps"])
            .output()
            .map_err(|e| format!("could not run cargo metadata: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo metadata failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |name: &str| -> Option<PathBuf> {
            let rest = text.split(&format!("\"{name}\":\"")).nth(1)?;
            Some(PathBuf::from(rest.split('"').next()?))
        };
        let target = field("target_directory").ok_or("cargo metadata names no target folder")?;
        let build = field("build_directory").unwrap_or_else(|| target.clone());
        Ok(Dirs { target, build })
    }

    /// Where the scratch crates' final outputs go.
    fn checks(&self) -> PathBuf {
        self.target.join("package-check")
    }
}

/// cargo for the fresh crate, with the given toolchain and nothing of the
/// workspace's configuration.
fn fresh_cargo(fresh: &Path, toolchain: &str, dirs: &Dirs) -> Command {
    // The rustup proxy, not $CARGO: the toolchain is chosen by
    // RUSTUP_TOOLCHAIN, since the fresh crate has no rust-toolchain.toml.
    let mut cmd = Command::new("cargo");
    cmd.current_dir(fresh)
        .env("RUSTUP_TOOLCHAIN", toolchain)
        .env("CARGO_BUILD_BUILD_DIR", &dirs.build)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC");
    cmd
}

/// A stable name for this clone's scratch folder in the shared cache.
fn clone_id(root: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    root.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("could not remove {}: {e}", dir.display())),
    }
}

/// Every file under `dir`, relative to it, with `/` separators.
fn files_under(dir: &Path) -> Result<BTreeSet<String>> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeSet<String>) -> Result<()> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        };
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                walk(&path, base, out)?;
            } else {
                let rel = path.strip_prefix(base).expect("walked from base");
                out.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
        Ok(())
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

/// What a package must and must not hold.
fn check_contents(name: &str, dir: &Path) -> Result<()> {
    let files = files_under(dir)?;
    let required = MUST_SHIP
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap_or_default();
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|f| !files.contains(*f))
        .collect();
    let stray: Vec<&String> = files
        .iter()
        .filter(|f| MUST_NOT_SHIP.iter().any(|p| f.starts_with(p)))
        .collect();
    if missing.is_empty() && stray.is_empty() {
        eprintln!("xtask package: {name} {VERSION}: {} files", files.len());
        Ok(())
    } else {
        Err(format!(
            "the package {name} lacks {missing:?} and ships {stray:?}; fix `include`/`exclude` \
             in its Cargo.toml"
        ))
    }
}

/// Makes `to` hold exactly the files of `from`, rewriting only files whose
/// contents differ (see the module comment).
fn sync(from: &Path, to: &Path) -> Result<()> {
    let wanted = files_under(from)?;
    for rel in files_under(to)?.difference(&wanted) {
        fs::remove_file(to.join(rel)).map_err(|e| format!("{rel}: {e}"))?;
    }
    for rel in &wanted {
        let bytes = fs::read(from.join(rel)).map_err(|e| format!("{rel}: {e}"))?;
        write_if_changed(&to.join(rel), &bytes)?;
    }
    Ok(())
}

/// Writes `bytes` to `dest` (and its folders) unless it holds them already,
/// so that an unchanged file keeps its timestamp (see the module comment).
fn write_if_changed(dest: &Path, bytes: &[u8]) -> Result<()> {
    if fs::read(dest).ok().as_deref() == Some(bytes) {
        return Ok(());
    }
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    fs::write(dest, bytes).map_err(|e| format!("{}: {e}", dest.display()))
}

/// Writes a scratch crate (only files that changed, as `sync`), with the
/// workspace's lock file if given: it pins every registry dependency to the
/// version the workspace built, which is what lets them be reused.
fn write_crate(
    dir: &Path,
    files: &[(&str, &str)],
    vars: &[(&str, &str)],
    crates: &Path,
    lock: Option<&str>,
) -> Result<()> {
    let lock: Vec<(&str, &str)> = lock.map(|l| ("Cargo.lock", l)).into_iter().collect();
    for (rel, text) in files.iter().chain(&lock) {
        let mut text = text
            .replace("@VERSION@", VERSION)
            .replace("@CRATES@", &crates.display().to_string());
        for (key, value) in vars {
            text = text.replace(key, value);
        }
        write_if_changed(&dir.join(rel), text.as_bytes())?;
    }
    Ok(())
}

/// `[patch.crates-io]` entries for a package and the packages it depends
/// on (an entry outside the crate graph draws a warning).
fn patch_lines(name: &str, crates: &Path) -> String {
    let used: &[&str] = if name == "remat" { CRATES } else { &[name] };
    used.iter()
        .map(|c| {
            format!(
                "{c} = {{ path = {:?} }}\n",
                crates.join(format!("{c}-{VERSION}"))
            )
        })
        .collect()
}

/// The features of a package's `[package.metadata.docs.rs]` (none if it
/// has no such table), read from its normalized manifest.
fn docs_rs_features(package: &Path) -> Result<Vec<String>> {
    let manifest = package.join("Cargo.toml");
    let text = fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let Some(table) = text.split("[package.metadata.docs.rs]").nth(1) else {
        return Ok(Vec::new());
    };
    let table = table.split("\n[").next().unwrap_or_default();
    let Some(line) = table
        .lines()
        .find(|l| l.trim_start().starts_with("features"))
    else {
        return Ok(Vec::new());
    };
    let list = line.split_once('=').map(|(_, v)| v).unwrap_or_default();
    Ok(list
        .trim()
        .trim_matches(['[', ']'])
        .split(',')
        .map(|f| f.trim().trim_matches('"').to_string())
        .filter(|f| !f.is_empty())
        .collect())
}

/// The value of `key = "..."` on the first line that sets it.
fn toml_string(path: &Path, key: &str) -> Result<String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
        })
        .ok_or_else(|| format!("{} sets no {key}", path.display()))
}

/// The toolchain of rust-toolchain.toml, which the workspace builds with.
fn toolchain_channel(root: &Path) -> Result<String> {
    toml_string(&root.join("rust-toolchain.toml"), "channel")
}

/// The workspace's `rust-version`, as a toolchain name (`1.85` is 1.85.0).
fn rust_version(root: &Path) -> Result<String> {
    let version = toml_string(&root.join("Cargo.toml"), "rust-version")?;
    Ok(match version.matches('.').count() {
        1 => format!("{version}.0"),
        _ => version,
    })
}

/// Installs the toolchain with rustup unless it is there.
fn ensure_toolchain(name: &str) -> Result<()> {
    let listed = Command::new("rustup")
        .args(["toolchain", "list"])
        .output()
        .map_err(|e| format!("the rust-version check needs rustup to install Rust {name}: {e}"))?;
    let installed = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l.starts_with(&format!("{name}-")));
    if installed {
        return Ok(());
    }
    eprintln!("xtask package: installing Rust {name} (minimal profile) for the rust-version check");
    run(Command::new("rustup").args(["toolchain", "install", name, "--profile", "minimal"]))
}
