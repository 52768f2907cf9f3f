//! Gloo's C++ headers for `remat_distributed` (c10d's Gloo process group
//! includes them; libtorch ships Gloo's code but not its headers). `setup`
//! fetches Debian's `libgloo-dev` package, pinned by version and checksum,
//! unpacks its headers into the per-user cache and links them as `.gloo`
//! in the repository, where `.cargo/config.toml` points `GLOO_INCLUDE`.
//! Nothing is installed system-wide, and no root is needed.

use crate::debian::Package;
use crate::Result;
use std::fs;
use std::path::{Path, PathBuf};

/// Debian bookworm's package, the headers of the Gloo that libtorch's c10d
/// is compiled against (its types are all held behind pointers there, so
/// this older snapshot changes no layout the bridge relies on).
const PACKAGE: Package = Package {
    name: "libgloo-dev_0.0~git20220518.5b14351-3_amd64.deb",
    url: "http://deb.debian.org/debian/pool/main/g/gloo/libgloo-dev_0.0~git20220518.5b14351-3_amd64.deb",
    sha256: "80529c9fd8af452faf489e686b94bf87075965c40673803810c4f41634b1e299",
    otherwise: "remat_distributed needs Gloo's headers: install `libgloo-dev` and set \
                GLOO_INCLUDE=/usr/include",
};

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
    eprintln!(
        "xtask setup: fetching Gloo's headers ({}, 49 KB) from Debian",
        PACKAGE.name
    );
    PACKAGE.unpack_into(base)
}
