//! `cargo xtask walkthrough`, and a part of `test`: the files of
//! docs/architecture.md's walk-through equal the files whose code runs in
//! its scenario. The scenario is `tests/walkthrough.rs`; its test binary
//! (built by the suite already) runs under callgrind, and every source file
//! of `remat_runtime` (Rust and C++) that callgrind attributes executed
//! code to, inlined code included, must be in the walk-through's table, and
//! every file there must have run. A file added to the path or taken off it
//! fails the check until the walk-through says so.
//!
//! callgrind is valgrind's; where no `valgrind` is on the `PATH`, Debian's
//! package, pinned by version and checksum, is unpacked into the per-user
//! cache and run from there (as `gloo.rs` does with Gloo's headers).

use crate::debian::Package;
use crate::leaks::test_executables;
use crate::paths::{cache_dir, repo_root};
use crate::run::run;
use crate::Result;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian bookworm's valgrind.
const VALGRIND: Package = Package {
    name: "valgrind_3.19.0-1_amd64.deb",
    url: "http://deb.debian.org/debian/pool/main/v/valgrind/valgrind_3.19.0-1_amd64.deb",
    sha256: "324842f2308a1e42abf2d81ff5eb19a9475fc9db95647f4d9da71444eda4087f",
    otherwise: "the walk-through check needs valgrind: install it",
};

/// The walk-through's table of files begins after this heading.
const HEADING: &str = "### Every file the scenario runs";

/// The folders whose files the check compares: the runtime's sources.
const CHECKED: &[&str] = &["remat_runtime/src/", "remat_runtime/csrc/"];

/// The crate root: it holds no code, but rustc's debug info attributes some
/// inlined library code to it (as `tests/architecture.rs` leaves facades
/// out, so does the check).
const LEFT_OUT: &[&str] = &["remat_runtime/src/lib.rs"];

pub(crate) fn walkthrough() -> Result<()> {
    let bins = test_executables(&["walkthrough"])?;
    let (_, bin) = &bins[0];
    let out = repo_root().join("target").join("walkthrough");
    fs::create_dir_all(&out).map_err(|e| format!("could not create {}: {e}", out.display()))?;
    let profile = out.join("callgrind.out");
    eprintln!("xtask test: the walk-through's scenario under callgrind (about 30 s)");
    let mut cmd = valgrind()?;
    cmd.args(["--tool=callgrind", "--quiet"])
        .arg(format!("--callgrind-out-file={}", profile.display()))
        .arg(bin)
        .args(["--test-threads=1", "--quiet"])
        .current_dir(repo_root());
    run(&mut cmd)?;
    let ran = files_that_ran(&profile)?;
    let listed = files_listed(&repo_root().join("docs").join("architecture.md"))?;
    compare(&ran, &listed)
}

/// valgrind: the system's, else Debian's package unpacked in the cache.
fn valgrind() -> Result<Command> {
    if Command::new("valgrind").arg("--version").output().is_ok() {
        return Ok(Command::new("valgrind"));
    }
    let base = cache_dir()?.join("valgrind-3.19.0-1");
    let bin = base.join("usr").join("bin").join("valgrind.bin");
    if !bin.is_file() {
        eprintln!(
            "xtask: fetching valgrind ({}, 14 MB) from Debian for callgrind",
            VALGRIND.name
        );
        VALGRIND.unpack_into(&base)?;
    }
    let mut cmd = Command::new(bin);
    // The launcher finds its tools here when it is not where it was built for.
    cmd.env(
        "VALGRIND_LIB",
        base.join("usr").join("libexec").join("valgrind"),
    );
    Ok(cmd)
}

/// The checked files callgrind attributes code to, relative to the
/// repository: those of functions (`fl`, `cfl`) and of inlined code (`fi`,
/// `fe`, `cfi`). A name is given once, with its number; later lines repeat
/// only the number.
fn files_that_ran(profile: &Path) -> Result<BTreeSet<String>> {
    let text = fs::read_to_string(profile)
        .map_err(|e| format!("could not read {}: {e}", profile.display()))?;
    let root = repo_root();
    let mut files = BTreeSet::new();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once('=') else {
            continue;
        };
        if !matches!(key, "fl" | "fi" | "fe" | "cfl" | "cfi") {
            continue;
        }
        let Some((_, name)) = rest.split_once(") ") else {
            continue;
        };
        if let Some(file) = relative(&root, name) {
            files.insert(file);
        }
    }
    if files.is_empty() {
        return Err(format!(
            "callgrind attributed no code to remat_runtime's sources in {}: is the test \
             profile built without debug info?",
            profile.display()
        ));
    }
    Ok(files)
}

/// `name` relative to the repository, if it is a checked file.
fn relative(root: &Path, name: &str) -> Option<String> {
    let path = PathBuf::from(name);
    let path = path.strip_prefix(root).ok()?.to_str()?.to_string();
    let checked = CHECKED.iter().any(|folder| path.starts_with(folder));
    (checked && !LEFT_OUT.contains(&path.as_str())).then_some(path)
}

/// The files the walk-through's table names: the first path in backticks
/// of each row under [`HEADING`], up to the next heading.
fn files_listed(doc: &Path) -> Result<BTreeSet<String>> {
    let text =
        fs::read_to_string(doc).map_err(|e| format!("could not read {}: {e}", doc.display()))?;
    let section = text
        .split_once(HEADING)
        .map(|(_, after)| after)
        .ok_or_else(|| format!("{} has no section `{HEADING}`", doc.display()))?;
    let mut files = BTreeSet::new();
    for line in section.lines().skip(1) {
        if line.starts_with('#') {
            break;
        }
        let Some(cell) = line.strip_prefix("| `") else {
            continue;
        };
        let Some((path, _)) = cell.split_once('`') else {
            continue;
        };
        files.insert(path.to_string());
    }
    Ok(files)
}

fn compare(ran: &BTreeSet<String>, listed: &BTreeSet<String>) -> Result<()> {
    let unlisted: Vec<&str> = ran.difference(listed).map(String::as_str).collect();
    let idle: Vec<&str> = listed.difference(ran).map(String::as_str).collect();
    if unlisted.is_empty() && idle.is_empty() {
        eprintln!(
            "xtask test: the walk-through names the {} files its scenario runs",
            ran.len()
        );
        return Ok(());
    }
    let mut message = String::from(
        "docs/architecture.md's walk-through and the files its scenario runs \
         (tests/walkthrough.rs under callgrind) differ:",
    );
    if !unlisted.is_empty() {
        message += &format!("\n  ran, not in the walk-through: {}", unlisted.join(", "));
    }
    if !idle.is_empty() {
        message += &format!("\n  in the walk-through, did not run: {}", idle.join(", "));
    }
    message += &format!("\n  (the table under `{HEADING}` lists every file that runs)");
    Err(message)
}
