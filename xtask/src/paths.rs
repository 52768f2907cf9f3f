//! Where the tasks find the repository and keep what they install: one
//! per-user cache, shared by every clone, so that a second clone does not
//! download libtorch again.

use crate::Result;
use std::env;
use std::path::{Path, PathBuf};

pub(crate) fn repo_root() -> PathBuf {
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
