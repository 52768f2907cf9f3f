//! Gloo's C++ headers for `remat_distributed` (c10d's Gloo process group
//! includes them; libtorch ships Gloo's code but not its headers). `setup`
//! fetches Debian's `libgloo-dev` package, pinned by version and checksum,
//! unpacks its headers into the per-user cache and links them as `.gloo`
//! in the repository, where `.cargo/config.toml` points `GLOO_INCLUDE`.
//! Nothing is installed system-wide, and no root is needed.

use crate::run::run;
use crate::Result;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian bookworm's package, the headers of the Gloo that libtorch's c10d
/// is compiled against (its types are all held behind pointers there, so
/// this older snapshot changes no layout the bridge relies on).
const PACKAGE: &str = "libgloo-dev_0.0~git20220518.5b14351-3_amd64.deb";
const URL: &str =
    "http://deb.debian.org/debian/pool/main/g/gloo/libgloo-dev_0.0~git20220518.5b14351-3_amd64.deb";
const SHA256: &str = "80529c9fd8af452faf489e686b94bf87075965c40673803810c4f41634b1e299";

/// The cached include folder (holding `gloo/config.h`), fetched if absent,
/// linked as `<repo>/.gloo/include`.
pub fn setup(cache: &Path, repo: &Path) -> Result<PathBuf> {
    let base = cache.join("gloo-0.0-git20220518");
    let include = base.join("usr").join("include");
    if !include.join("gloo").join("config.h").is_file() {
        fetch(&base)?;
    }
    let link = repo.join(".gloo");
    if fs::read_link(&link).ok().as_deref() != Some(base.join("usr").as_path()) {
        if link.symlink_metadata().is_ok() {
            fs::remove_file(&link)
                .map_err(|e| format!("could not replace {}: {e}", link.display()))?;
        }
        std::os::unix::fs::symlink(base.join("usr"), &link)
            .map_err(|e| format!("could not link {}: {e}", link.display()))?;
    }
    Ok(include)
}

fn fetch(base: &Path) -> Result<()> {
    eprintln!("xtask setup: fetching Gloo's headers ({PACKAGE}, 49 KB) from Debian");
    if base.exists() {
        fs::remove_dir_all(base)
            .map_err(|e| format!("could not remove stale {}: {e}", base.display()))?;
    }
    fs::create_dir_all(base).map_err(|e| format!("could not create {}: {e}", base.display()))?;
    let deb = base.join(PACKAGE);
    run(Command::new("curl")
        .args(["--fail", "--silent", "--show-error", "--location", "-o"])
        .arg(&deb)
        .arg(URL))
    .map_err(|e| {
        format!(
            "{e}\n  remat_distributed needs Gloo's headers: install `libgloo-dev` and set \
             GLOO_INCLUDE=/usr/include, or let `cargo xtask setup` reach {URL}"
        )
    })?;
    let sum = Command::new("sha256sum")
        .arg(&deb)
        .output()
        .map_err(|e| format!("could not run sha256sum: {e}"))?;
    let sum = String::from_utf8_lossy(&sum.stdout);
    if sum.split_whitespace().next() != Some(SHA256) {
        return Err(format!(
            "{} has checksum {}, expected {SHA256}",
            deb.display(),
            sum.trim()
        ));
    }
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(base)).map_err(|e| {
        format!("{e}\n  unpacking {PACKAGE} needs `dpkg-deb` (Debian's dpkg package)")
    })?;
    fs::remove_file(&deb).map_err(|e| format!("could not remove {}: {e}", deb.display()))?;
    Ok(())
}
