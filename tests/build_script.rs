//! remat_runtime's build script finds libtorch's headers and C++ ABI from
//! the variables torch-sys reads, and its errors name them
//! (`remat_runtime/build/libtorch.rs`, driven here with a made-up
//! environment and libtorch folders in a scratch directory).

#[allow(dead_code)]
#[path = "../remat_runtime/build/libtorch.rs"]
mod libtorch;

use libtorch::{find, BuildEnv, Libtorch};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

struct FakeEnv {
    vars: HashMap<&'static str, &'static str>,
    python: Result<&'static str, &'static str>,
}

impl FakeEnv {
    fn new(vars: &[(&'static str, &'static str)]) -> FakeEnv {
        FakeEnv {
            vars: vars.iter().copied().collect(),
            python: Err("no Python in this test"),
        }
    }
}

impl BuildEnv for FakeEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).map(|v| v.to_string())
    }

    fn python(&self, _script: &str) -> Result<String, String> {
        self.python.map(str::to_string).map_err(str::to_string)
    }
}

/// A libtorch folder (`lib/`, `include/torch/`) with the given version
/// files, in a fresh scratch directory; returns its `lib/`.
fn libtorch_dir(files: &[(&str, &str)]) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let root = std::env::temp_dir().join(format!(
        "remat-build-script-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::fs::create_dir_all(root.join("include/torch")).unwrap();
    for (name, text) in files {
        std::fs::write(root.join(name), text).unwrap();
    }
    root.join("lib")
}

fn wheel() -> PathBuf {
    libtorch_dir(&[(
        "version.py",
        "__version__ = '2.13.0+cpu'\ngit_version = 'x'\n",
    )])
}

/// Every error says what to set.
fn assert_names_the_variables(message: &str) {
    for var in ["LIBTORCH ", "LIBTORCH_USE_PYTORCH=1", "LIBTORCH_CXX11_ABI"] {
        assert!(message.contains(var), "{var} missing from: {message}");
    }
}

fn includes(lib: &Path) -> Vec<PathBuf> {
    let include = lib.join("..").join("include");
    vec![include.clone(), include.join("torch/csrc/api/include")]
}

#[test]
fn a_wheel_folder_compiles_with_its_headers_and_the_cxx11_abi_by_default() {
    let lib = wheel();
    let found = find(&lib, &FakeEnv::new(&[("LIBTORCH", "x")])).unwrap();
    assert_eq!(
        found,
        Libtorch {
            lib: lib.clone(),
            includes: includes(&lib),
            cxx11_abi: "1".into(),
        }
    );
}

#[test]
fn libtorch_cxx11_abi_chooses_the_abi_outside_python_mode() {
    let lib = wheel();
    let env = FakeEnv::new(&[("LIBTORCH", "x"), ("LIBTORCH_CXX11_ABI", "0")]);
    assert_eq!(find(&lib, &env).unwrap().cxx11_abi, "0");
    let env = FakeEnv::new(&[("LIBTORCH_CXX11_ABI", "yes")]);
    let err = find(&lib, &env).unwrap_err();
    assert!(err.contains("LIBTORCH_CXX11_ABI is \"yes\""), "{err}");
    assert_names_the_variables(&err);
}

#[test]
fn a_plain_download_is_recognised_by_its_build_version_file() {
    let lib = libtorch_dir(&[("build-version", "2.13.0+cu130\n")]);
    assert!(find(&lib, &FakeEnv::new(&[])).is_ok());
}

#[test]
fn every_release_of_the_supported_set_is_accepted() {
    // The wheels' version.py and the downloads' build-version, 2.11 (tch
    // 0.24) and 2.13 (tch 0.26), any patch release and local suffix.
    for version in [
        "2.11.0",
        "2.11.0+cu130",
        "2.11.1+cpu",
        "2.13.0",
        "2.13.2+cu130",
    ] {
        let text = format!("__version__ = '{version}'\n");
        let lib = libtorch_dir(&[("version.py", &text)]);
        assert!(find(&lib, &FakeEnv::new(&[])).is_ok(), "{version} refused");
        let lib = libtorch_dir(&[("build-version", &format!("{version}\n"))]);
        assert!(find(&lib, &FakeEnv::new(&[])).is_ok(), "{version} refused");
    }
}

#[test]
fn another_libtorch_version_is_refused_naming_the_supported_set() {
    for version in [
        "2.12.1", "2.10.0", "2.14.0", "3.11.0", "2.13", "2.11.0a0", "",
    ] {
        let text = format!("__version__ = \"{version}\"\n");
        let lib = libtorch_dir(&[("version.py", &text)]);
        let err = find(&lib, &FakeEnv::new(&[])).unwrap_err();
        assert!(
            err.contains(&format!(
                "is version {version:?}, but remat supports libtorch 2.11 (with tch 0.24) or \
                 2.13 (with tch 0.26); there is no tch release for 2.12."
            )),
            "{err}"
        );
        assert_names_the_variables(&err);
    }
    let lib = libtorch_dir(&[("version.py", "__version__ = \"2.12.1\"\n")]);
    let bypass = FakeEnv::new(&[("LIBTORCH_BYPASS_VERSION_CHECK", "1")]);
    assert!(find(&lib, &bypass).is_ok());
}

#[test]
fn the_supported_set_pairs_each_libtorch_with_its_tch() {
    assert_eq!(libtorch::SUPPORTED, &[("2.11", "0.24"), ("2.13", "0.26")]);
    assert!(libtorch::supported("2.11.0+cu130"));
    assert!(!libtorch::supported("2.12.0"));
}

#[test]
fn a_libtorch_without_version_files_is_refused_with_what_to_set() {
    let lib = libtorch_dir(&[]);
    let err = find(&lib, &FakeEnv::new(&[])).unwrap_err();
    assert!(
        err.contains("neither version.py nor build-version"),
        "{err}"
    );
    assert_names_the_variables(&err);
}

#[test]
fn missing_headers_are_refused_with_what_to_set() {
    let lib = wheel();
    std::fs::remove_dir_all(lib.join("../include")).unwrap();
    let err = find(&lib, &FakeEnv::new(&[])).unwrap_err();
    assert!(err.contains("no libtorch headers at"), "{err}");
    assert_names_the_variables(&err);
}

#[test]
fn libtorch_include_moves_the_headers_as_for_torch_sys() {
    let lib = wheel();
    let elsewhere = wheel();
    let include_root = elsewhere.join("..").to_str().unwrap().to_string();
    let include_root: &'static str = Box::leak(include_root.into_boxed_str());
    let env = FakeEnv::new(&[("LIBTORCH_INCLUDE", include_root)]);
    assert_eq!(find(&lib, &env).unwrap().includes, includes(&elsewhere));
    // In Python mode torch-sys takes the headers from Python, beside lib/.
    let mut python = FakeEnv::new(&[
        ("LIBTORCH_INCLUDE", include_root),
        ("LIBTORCH_USE_PYTORCH", "1"),
    ]);
    python.python = Ok("1\n");
    assert_eq!(find(&lib, &python).unwrap().includes, includes(&lib));
}

#[test]
fn python_mode_asks_python_for_the_abi_and_ignores_libtorch_cxx11_abi() {
    let lib = wheel();
    let mut env = FakeEnv::new(&[("LIBTORCH_USE_PYTORCH", "1"), ("LIBTORCH_CXX11_ABI", "1")]);
    env.python = Ok("0\n");
    assert_eq!(find(&lib, &env).unwrap().cxx11_abi, "0");
    env.python = Err("No module named 'torch'");
    let err = find(&lib, &env).unwrap_err();
    assert!(
        err.contains("asking Python for torch's C++ ABI failed: No module named 'torch'"),
        "{err}"
    );
    assert_names_the_variables(&err);
}
