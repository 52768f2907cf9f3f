//! A Debian package fetched and unpacked into the per-user cache, pinned by
//! URL and checksum: what `gloo.rs` (Gloo's headers) and `walkthrough.rs`
//! (valgrind, where the system has none) take from Debian without root.

use crate::run::run;
use crate::Result;
use std::fs;
use std::path::Path;
use std::process::Command;

/// One pinned package.
pub(crate) struct Package {
    /// Its file name, as the pool has it.
    pub name: &'static str,
    pub url: &'static str,
    pub sha256: &'static str,
    /// What a failed download says the user can do instead.
    pub otherwise: &'static str,
}

impl Package {
    /// Downloads the package and unpacks it into `base` (emptied first).
    pub(crate) fn unpack_into(&self, base: &Path) -> Result<()> {
        if base.exists() {
            fs::remove_dir_all(base)
                .map_err(|e| format!("could not remove stale {}: {e}", base.display()))?;
        }
        fs::create_dir_all(base)
            .map_err(|e| format!("could not create {}: {e}", base.display()))?;
        let deb = base.join(self.name);
        run(Command::new("curl")
            .args(["--fail", "--silent", "--show-error", "--location", "-o"])
            .arg(&deb)
            .arg(self.url))
        .map_err(|e| format!("{e}\n  {}, or let xtask reach {}", self.otherwise, self.url))?;
        let sum = Command::new("sha256sum")
            .arg(&deb)
            .output()
            .map_err(|e| format!("could not run sha256sum: {e}"))?;
        let sum = String::from_utf8_lossy(&sum.stdout);
        if sum.split_whitespace().next() != Some(self.sha256) {
            return Err(format!(
                "{} has checksum {}, expected {}",
                deb.display(),
                sum.trim(),
                self.sha256
            ));
        }
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(base)).map_err(|e| {
            format!(
                "{e}\n  unpacking {} needs `dpkg-deb` (Debian's dpkg package)",
                self.name
            )
        })?;
        fs::remove_file(&deb).map_err(|e| format!("could not remove {}: {e}", deb.display()))
    }
}
