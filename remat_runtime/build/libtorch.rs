//! Where the bridge's headers are and which C++ ABI it is built with,
//! decided from the same variables torch-sys reads, so that the bridge and
//! tch's own C++ wrapper are compiled alike.
//!
//! torch-sys runs first and reports only its `lib/` folder
//! (`DEP_TCH_LIBTORCH_LIB`); the headers and the ABI it used are re-derived
//! here. No file of a clone (`.libtorch`, the xtask) is consulted: a crate
//! from the registry builds with the variables alone. The logic takes its
//! environment as a trait so that `tests/build_script.rs` can drive it.

use std::path::{Path, PathBuf};

/// The libtorch releases remat builds against, each with the tch release
/// whose generated bindings are written for it: (libtorch major.minor, tch).
/// Any patch release of one is accepted. There is no tch for 2.12 (tch went
/// from 0.24 to 0.26), and tch 0.26 does not build against 2.12: its
/// bindings call 2.13's new operators.
pub const SUPPORTED: &[(&str, &str)] = &[("2.11", "0.24"), ("2.13", "0.26")];

/// The supported set in words, as every message of this module names it.
pub const SUPPORTED_IN_WORDS: &str = "libtorch 2.11 (with tch 0.24) or 2.13 (with tch 0.26)";

/// What to set, quoted by every error of this module.
pub const HOW_TO_SET: &str = "remat finds libtorch 2.11 or 2.13 as torch-sys does: set \
     LIBTORCH to the folder holding its lib/ and include/ (and LIBTORCH_CXX11_ABI=0 if it was \
     built with the pre-C++11 ABI; the PyPI wheels and the cxx11 downloads need none), or set \
     LIBTORCH_USE_PYTORCH=1 with a Python environment activated that has torch==2.13.0 (or \
     torch==2.11.0) installed. LIBTORCH_BYPASS_VERSION_CHECK=1 skips the version check.";

/// The build script's view of its surroundings.
pub trait BuildEnv {
    /// An environment variable (the build script also asks cargo to rerun
    /// when it changes).
    fn var(&self, name: &str) -> Option<String>;
    /// Runs a Python script with the interpreter torch-sys would use and
    /// returns its standard output.
    fn python(&self, script: &str) -> Result<String, String>;
}

/// How to compile against libtorch.
#[derive(Debug, PartialEq, Eq)]
pub struct Libtorch {
    /// The folder of `libtorch_cpu.so`.
    pub lib: PathBuf,
    /// Header folders, passed as `-isystem`.
    pub includes: Vec<PathBuf>,
    /// `_GLIBCXX_USE_CXX11_ABI`: `"0"` or `"1"`.
    pub cxx11_abi: String,
}

/// Asks the active Python's torch which ABI it was built with; torch-sys
/// asks the same in this mode and does not pass the answer on.
const PYTHON_ABI: &str = "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))";

/// The headers and ABI for the libtorch whose `lib/` torch-sys found.
pub fn find(lib: &Path, env: &dyn BuildEnv) -> Result<Libtorch, String> {
    let python_mode = env.var("LIBTORCH_USE_PYTORCH").is_some();
    // Outside Python mode torch-sys takes headers from LIBTORCH_INCLUDE when
    // set; otherwise they sit beside lib/ (a libtorch folder, or the wheel's
    // torch/ package).
    let root = match env.var("LIBTORCH_INCLUDE").filter(|_| !python_mode) {
        Some(dir) => PathBuf::from(dir),
        None => lib.join(".."),
    };
    let include = root.join("include");
    if !include.join("torch").is_dir() {
        return Err(format!(
            "no libtorch headers at {} (torch-sys found libtorch's lib/ at {}). {HOW_TO_SET}",
            include.display(),
            lib.display()
        ));
    }
    if env.var("LIBTORCH_BYPASS_VERSION_CHECK").is_none() {
        check_version(lib)?;
    }
    let cxx11_abi = if python_mode {
        let out = env.python(PYTHON_ABI).map_err(|e| {
            format!("LIBTORCH_USE_PYTORCH is set but asking Python for torch's C++ ABI failed: {e}. {HOW_TO_SET}")
        })?;
        match out.trim() {
            abi @ ("0" | "1") => abi.to_string(),
            other => {
                return Err(format!(
                    "LIBTORCH_USE_PYTORCH is set but Python answered {other:?} for torch's C++ ABI. {HOW_TO_SET}"
                ))
            }
        }
    } else {
        match env.var("LIBTORCH_CXX11_ABI") {
            None => "1".to_string(),
            Some(abi) if abi == "0" || abi == "1" => abi,
            Some(other) => {
                return Err(format!(
                    "LIBTORCH_CXX11_ABI is {other:?}, but only 0 or 1 mean anything. {HOW_TO_SET}"
                ))
            }
        }
    };
    let includes = vec![include.clone(), include.join("torch/csrc/api/include")];
    Ok(Libtorch {
        lib: lib.to_path_buf(),
        includes,
        cxx11_abi,
    })
}

/// Each tch release's generated bindings match one libtorch release.
/// torch-sys checks that pairing only when a `build-version` file or Python
/// can say; a wheel's `torch/` folder has `version.py` instead, read here.
/// Which tch the lock file chose is not visible to this script (torch-sys
/// passes on only its `lib/` folder), so the version is checked against the
/// set; a tch of the other release fails earlier, in torch-sys's own C++
/// wrapper, which calls operators that only its libtorch has.
fn check_version(lib: &Path) -> Result<(), String> {
    let root = lib.join("..");
    let version = if let Ok(text) = std::fs::read_to_string(root.join("version.py")) {
        text.lines()
            .find_map(|l| l.trim().strip_prefix("__version__"))
            .map(|v| {
                v.trim_start_matches([' ', '='])
                    .trim()
                    .trim_matches(['\'', '"'])
                    .to_string()
            })
            .unwrap_or_default()
    } else if let Ok(text) = std::fs::read_to_string(root.join("build-version")) {
        text.trim().to_string()
    } else {
        return Err(format!(
            "cannot tell the version of the libtorch at {} (it has neither version.py nor \
             build-version). {HOW_TO_SET}",
            root.display()
        ));
    };
    if supported(&version) {
        Ok(())
    } else {
        Err(format!(
            "the libtorch at {} is version {version:?}, but remat supports \
             {SUPPORTED_IN_WORDS}; there is no tch release for 2.12. {HOW_TO_SET}",
            root.display()
        ))
    }
}

/// Whether a version string (`2.11.0`, `2.13.1+cu130`) is a release of the
/// supported set.
pub fn supported(version: &str) -> bool {
    let release = version.split('+').next().unwrap_or_default();
    let mut parts = release.split('.');
    let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
        return false;
    };
    // A patch number, and nothing after it: `2.13` alone or `2.13.0a0` is no release.
    let patch_ok = match (parts.next(), parts.next()) {
        (Some(patch), None) => !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit()),
        _ => false,
    };
    let major_minor = format!("{major}.{minor}");
    patch_ok && SUPPORTED.iter().any(|(torch, _)| *torch == major_minor)
}
