//! The leak check: `cargo xtask leaks`, and a part of `test` and `soak`.
//! Test binaries the suite built already rerun under LeakSanitizer, so the
//! check costs no build of its own.

use crate::paths::repo_root;
use crate::run::cargo;
use crate::Result;
use std::path::PathBuf;
use std::process::Command;

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
pub(crate) fn test_executables(names: &[&str]) -> Result<Vec<(String, PathBuf)>> {
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
pub(crate) fn leaks() -> Result<()> {
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
