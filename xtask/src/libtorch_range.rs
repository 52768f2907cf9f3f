//! `cargo xtask test --libtorch 2.11`: the test suite against a libtorch of
//! the supported set other than the one `cargo xtask test` uses (2.13).
//!
//! remat asks for tch `>=0.24, <0.27`; the repository's Cargo.lock holds
//! 0.26 (libtorch 2.13), and a run against 2.11 needs a lock file with tch
//! and torch-sys 0.24. Rather than rewriting the repository's lock and
//! putting it back (which an interrupted run or a failed step could leave
//! undone), the run works in a copy of the files git tracks, in
//! `target/libtorch-<v>/src`, whose lock file alone is changed, with its own
//! build folder `target/libtorch-<v>/target`. The copy's `.libtorch` points at
//! the other libtorch, installed as `setup` installs 2.13 (its own venv in
//! the per-user cache), so the copy's `.cargo/config.toml` and the training
//! example's, which name `.libtorch` by a relative path, find it. In the copy
//! the copy's own xtask runs `test-suite`: the same steps as `cargo xtask
//! test`, and the training example, with that copy as its repository.
//!
//! `LIBTORCH` is also set in the copy's environment: `cargo xtask` runs with
//! the workspace's `[env]` values exported, and cargo lets an inherited
//! variable win over a config `[env]` entry (without `force`), so the
//! inherited 2.13 path would otherwise reach the copy's builds.
//!
//! The `package` step is left out: it resolves `remat = "0.1"` for a fresh
//! crate against the registry with a new lock file, which picks tch 0.26.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::paths::repo_root;
use crate::run::run;
use crate::setup::install_torch;
use crate::Result;

/// A libtorch of the supported set other than 2.13, with the tch release
/// written against it (docs/architecture.md, "Getting libtorch").
struct Other {
    /// What `--libtorch` takes.
    flag: &'static str,
    /// The PyPI release of torch.
    torch: &'static str,
    /// tch and torch-sys for it.
    tch: &'static str,
}

const OTHERS: &[Other] = &[Other {
    flag: "2.11",
    torch: "2.11.0",
    tch: "0.24.0",
}];

/// Set in the copy's environment to the `--libtorch` value, so that a test
/// of the lock file knows which tch it must find there.
const RANGE_VAR: &str = "REMAT_LIBTORCH_RANGE";

/// The lock files the copy changes: the workspace's and the training
/// example's (a crate of its own).
const LOCKS: &[&str] = &["", "examples/train_gpt"];

/// `cargo xtask test --libtorch <v>` with `args` the words after `--libtorch`.
pub fn test(args: &[String]) -> Result<()> {
    let choices: Vec<&str> = OTHERS.iter().map(|o| o.flag).collect();
    let usage = || {
        format!(
            "usage: cargo xtask test --libtorch {} (2.13 is `cargo xtask test` itself), not {args:?}",
            choices.join("|")
        )
    };
    let [flag] = args else {
        return Err(usage());
    };
    let other = OTHERS.iter().find(|o| o.flag == flag).ok_or_else(usage)?;
    let started = Instant::now();
    let Prepared {
        torch,
        copy,
        target,
    } = prepare_other(other)?;
    let mut suite = Command::new(env_cargo());
    suite
        .current_dir(&copy)
        .args(["run", "--quiet", "--package", "xtask", "--", "test-suite"])
        .env("CARGO_TARGET_DIR", &target)
        .env("LIBTORCH", &torch)
        .env("LIBTORCH_CXX11_ABI", "1")
        .env(RANGE_VAR, other.flag);
    run(&mut suite)?;
    eprintln!(
        "xtask test --libtorch {}: passed in {:.0} min (the `package` step is not part of it)",
        other.flag,
        started.elapsed().as_secs_f64() / 60.0
    );
    Ok(())
}

/// A copy of the repository set up for another libtorch of the set.
pub(crate) struct Prepared {
    /// That libtorch's `torch/` folder.
    pub torch: PathBuf,
    /// The copy of the tracked files, its lock files on the matching tch.
    pub copy: PathBuf,
    /// Its build folder.
    pub target: PathBuf,
}

/// The copy for libtorch `flag` (`2.11`), brought up to date (what the GPU
/// kit builds in: its binaries must link the GPU machine's 2.11).
pub(crate) fn prepare(flag: &str) -> Result<Prepared> {
    let other = OTHERS
        .iter()
        .find(|o| o.flag == flag || o.torch == flag)
        .ok_or_else(|| format!("libtorch {flag} is not one of the other supported versions"))?;
    prepare_other(other)
}

fn prepare_other(other: &Other) -> Result<Prepared> {
    let torch = install_torch(other.torch)?;
    let root = repo_root();
    let base = root.join("target").join(format!("libtorch-{}", other.flag));
    let copy = base.join("src");
    let lock_before = fs::read(root.join("Cargo.lock")).map_err(|e| e.to_string())?;
    eprintln!(
        "xtask: libtorch {}: copying the tracked files into {}",
        other.flag,
        copy.display()
    );
    sync_tracked(&root, &copy, &base.join("copied.txt"))?;
    link(&torch, &copy.join(".libtorch"))?;
    // The copy's `.gloo`, as `setup` makes it for the repository.
    crate::gloo::setup(&crate::paths::cache_dir()?, &copy)?;
    for dir in LOCKS {
        pin_lock(&copy.join(dir), other.tch)?;
    }
    let lock_after = fs::read(root.join("Cargo.lock")).map_err(|e| e.to_string())?;
    if lock_before != lock_after {
        return Err("the repository's Cargo.lock changed; it must not".into());
    }
    let target = base.join("target");
    eprintln!(
        "xtask: libtorch {}: {}, tch {}, build folder {}",
        other.flag,
        torch.display(),
        other.tch,
        target.display()
    );
    Ok(Prepared {
        torch,
        copy,
        target,
    })
}

fn env_cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Copies what git tracks (and untracked files it does not ignore, so that
/// work not yet committed is tested too) from `root` into `copy`, writing
/// only files whose bytes differ: cargo judges path dependencies fresh by
/// timestamps, so an unchanged file keeps its own. Files a previous copy
/// wrote that are gone now are removed; `record` lists what was copied.
fn sync_tracked(root: &Path, copy: &Path, record: &Path) -> Result<()> {
    let out = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .map_err(|e| format!("could not run git (the copy lists the tracked files): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git ls-files failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let files: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|f| !f.is_empty())
        // A tracked file deleted in the work tree is not copied.
        .filter(|f| root.join(f).is_file())
        .map(str::to_string)
        .collect();
    let previous = fs::read_to_string(record).unwrap_or_default();
    for gone in previous.lines().filter(|f| !files.contains(*f)) {
        let _ = fs::remove_file(copy.join(gone));
    }
    for file in &files {
        let from = root.join(file);
        let to = copy.join(file);
        let bytes = fs::read(&from).map_err(|e| format!("{}: {e}", from.display()))?;
        if fs::read(&to).ok().as_deref() == Some(&bytes[..]) {
            continue;
        }
        if let Some(dir) = to.parent() {
            fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        fs::write(&to, &bytes).map_err(|e| format!("{}: {e}", to.display()))?;
        let perms = fs::metadata(&from)
            .map_err(|e| e.to_string())?
            .permissions();
        fs::set_permissions(&to, perms).map_err(|e| format!("{}: {e}", to.display()))?;
    }
    let listing: Vec<&str> = files.iter().map(String::as_str).collect();
    fs::write(record, listing.join("\n")).map_err(|e| format!("{}: {e}", record.display()))
}

fn link(target: &Path, link: &Path) -> Result<()> {
    if fs::read_link(link).ok().as_deref() == Some(target) {
        return Ok(());
    }
    if link.symlink_metadata().is_ok() {
        fs::remove_file(link).map_err(|e| format!("could not replace {}: {e}", link.display()))?;
    }
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| format!("could not link {}: {e}", link.display()))
}

/// Moves the lock file in `dir` to tch `version` (torch-sys follows, as tch
/// asks for its own release of it) and checks that it did.
fn pin_lock(dir: &Path, version: &str) -> Result<()> {
    run(Command::new(env_cargo()).current_dir(dir).args([
        "update",
        "--quiet",
        "--package",
        "tch",
        "--precise",
        version,
    ]))?;
    let lock = dir.join("Cargo.lock");
    let text = fs::read_to_string(&lock).map_err(|e| format!("{}: {e}", lock.display()))?;
    for name in ["tch", "torch-sys"] {
        let found = locked_versions(&text, name);
        if found != [version] {
            return Err(format!(
                "{} locks {name} at {found:?} after `cargo update`, not {version}",
                lock.display()
            ));
        }
    }
    Ok(())
}

/// The versions a lock file holds of one package.
pub(crate) fn locked_versions(lock: &str, name: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            if let Some(v) = lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = "))
            {
                found.push(v.trim_matches('"').to_string());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_versions_of_a_locked_package_are_read_from_its_entries() {
        let lock = "[[package]]\nname = \"tch\"\nversion = \"0.24.0\"\n\n\
                    [[package]]\nname = \"tch-ext\"\nversion = \"1.0.0\"\n\n\
                    [[package]]\nname = \"torch-sys\"\nversion = \"0.24.0\"\n";
        assert_eq!(locked_versions(lock, "tch"), ["0.24.0"]);
        assert_eq!(locked_versions(lock, "torch-sys"), ["0.24.0"]);
        assert!(locked_versions(lock, "remat").is_empty());
    }

    /// The repository's lock file is on tch 0.26; in the copy that `test
    /// --libtorch` runs in, on the tch of that libtorch.
    #[test]
    fn the_lock_file_holds_the_tch_of_the_libtorch_under_test() {
        let expected = match std::env::var(RANGE_VAR) {
            Ok(flag) => OTHERS.iter().find(|o| o.flag == flag).unwrap().tch,
            Err(_) => "0.26.0",
        };
        for dir in LOCKS {
            let lock = fs::read_to_string(repo_root().join(dir).join("Cargo.lock")).unwrap();
            assert_eq!(locked_versions(&lock, "tch"), [expected], "{dir}");
            assert_eq!(locked_versions(&lock, "torch-sys"), [expected], "{dir}");
        }
    }

    #[test]
    fn a_copy_gets_changed_files_and_loses_removed_ones() {
        let scratch = std::env::temp_dir().join(format!("xtask-sync-{}", std::process::id()));
        let _ = fs::remove_dir_all(&scratch);
        let (root, copy, record) = (
            scratch.join("root"),
            scratch.join("copy"),
            scratch.join("r"),
        );
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .current_dir(&root)
                .args(args)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join("a/kept.rs"), "1").unwrap();
        fs::write(root.join("gone.rs"), "2").unwrap();
        fs::write(root.join(".gitignore"), "ignored\n").unwrap();
        fs::write(root.join("ignored"), "3").unwrap();
        git(&["init", "--quiet"]);
        sync_tracked(&root, &copy, &record).unwrap();
        assert_eq!(fs::read_to_string(copy.join("a/kept.rs")).unwrap(), "1");
        assert!(copy.join("gone.rs").is_file());
        assert!(!copy.join("ignored").exists());
        fs::remove_file(root.join("gone.rs")).unwrap();
        fs::write(root.join("a/kept.rs"), "changed").unwrap();
        sync_tracked(&root, &copy, &record).unwrap();
        assert_eq!(
            fs::read_to_string(copy.join("a/kept.rs")).unwrap(),
            "changed"
        );
        assert!(!copy.join("gone.rs").exists());
        fs::remove_dir_all(&scratch).unwrap();
    }
}
