//! Compiles the C++ bridge against the libtorch that `torch-sys` found.

use std::env;
use std::path::{Path, PathBuf};

const TORCH_VERSION: &str = "2.13.0";

fn main() {
    let lib = env::var("DEP_TCH_LIBTORCH_LIB").expect(
        "torch-sys did not report DEP_TCH_LIBTORCH_LIB; run `cargo xtask setup` so that \
         LIBTORCH points at libtorch 2.13.0",
    );
    let lib = PathBuf::from(lib);
    check_version(&lib);
    let include = lib.join("..").join("include");
    let abi = env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_string());

    println!("cargo:rerun-if-changed=csrc/bridge.cpp");
    println!("cargo:rerun-if-changed=csrc/bridge.h");
    println!("cargo:rerun-if-changed=csrc/guard.h");
    println!("cargo:rerun-if-changed=csrc/cuda_diag.cpp");
    println!("cargo:rerun-if-changed=csrc/autocast.cpp");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    let cuda = env::var_os("CARGO_FEATURE_CUDA").is_some();

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .pic(true)
        .std("c++17")
        .flag("-isystem")
        .flag(
            include
                .to_str()
                .expect("libtorch include path is not UTF-8"),
        )
        .flag("-isystem")
        .flag(
            include
                .join("torch/csrc/api/include")
                .to_str()
                .expect("libtorch include path is not UTF-8"),
        )
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .flag_if_supported("-Wno-unused-parameter")
        .file("csrc/bridge.cpp")
        .file("csrc/autocast.cpp");
    if cuda {
        // The CUDA diagnostics (OOM observer, allocation contexts) need the
        // CUDA toolkit's headers. Without them (a CPU machine checking that
        // the `cuda` feature links) the stubs in bridge.cpp stand in, and the
        // diagnostics return an error saying so.
        match cuda_include(&lib) {
            Some(dir) => {
                build
                    .define("REMAT_CUDA", None)
                    .flag("-isystem")
                    .flag(dir.to_str().expect("CUDA include path is not UTF-8"))
                    .file("csrc/cuda_diag.cpp");
                // cuda_diag.cpp calls the CUDA caching allocator in libc10_cuda.
                println!("cargo:rustc-link-search=native={}", lib.display());
                println!("cargo:rustc-link-lib=dylib=c10_cuda");
            }
            None => println!(
                "cargo:warning=remat: no CUDA toolkit headers found (set CUDA_HOME); the CUDA \
                 diagnostics (OOM observer, allocation sites) are left out of this build"
            ),
        }
    }
    build.compile("remat_bridge");

    // Our own tests, examples and doctests run from target/: give them an rpath.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    println!("cargo:libtorch_lib={}", lib.display());

    if cuda {
        // Nothing references libtorch_cuda.so, so `--as-needed` drops it and
        // its static initialisers (which register the CUDA backend) never run.
        // Link args reach only this package's own binaries: every package
        // with binaries does the same (see the root build.rs).
        for arg in ["-Wl,--no-as-needed", "-ltorch_cuda", "-Wl,--as-needed"] {
            println!("cargo:rustc-link-arg={arg}");
        }
    }
}

/// Where the CUDA toolkit's headers are: `$CUDA_HOME/include`, the usual
/// toolkit folder, or the headers that the torch wheel's `nvidia-*`
/// packages install next to it (usable only when complete: with
/// `crt/host_config.h`).
fn cuda_include(lib: &Path) -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(env::var_os)
        .map(|home| PathBuf::from(home).join("include"))
        .collect();
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    // The wheel's headers appear when `cargo xtask setup` installs them.
    println!(
        "cargo:rerun-if-changed={}",
        lib.join("../../nvidia").display()
    );
    if let Ok(entries) = std::fs::read_dir(lib.join("../../nvidia")) {
        let mut wheel: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path().join("include"))
            .collect();
        wheel.sort();
        candidates.extend(wheel);
    }
    candidates.into_iter().find(|dir| {
        dir.join("cuda_runtime_api.h").exists() && dir.join("crt/host_config.h").exists()
    })
}

/// torch-sys skips its own version check when `LIBTORCH` is set: do it here,
/// since tch 0.26's generated bindings only match libtorch 2.13.0.
fn check_version(lib: &Path) {
    let version_py = lib.join("..").join("version.py");
    println!("cargo:rerun-if-changed={}", version_py.display());
    let Ok(text) = std::fs::read_to_string(&version_py) else {
        // A plain libtorch download has no version.py; its build-version file says it.
        let alt = lib.join("..").join("build-version");
        match std::fs::read_to_string(&alt) {
            Ok(v) if v.trim().starts_with(TORCH_VERSION) => return,
            Ok(v) => panic!(
                "libtorch at {} is version {}, but tch 0.26 needs {TORCH_VERSION}; \
                 run `cargo xtask setup`",
                lib.display(),
                v.trim()
            ),
            Err(_) => panic!(
                "cannot tell the version of libtorch at {} (no version.py or build-version); \
                 run `cargo xtask setup`",
                lib.display()
            ),
        }
    };
    let version = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("__version__"))
        .map(|v| {
            v.trim_start_matches([' ', '='])
                .trim()
                .trim_matches(['\'', '"'])
                .to_string()
        })
        .unwrap_or_default();
    if version != TORCH_VERSION && !version.starts_with(&format!("{TORCH_VERSION}+")) {
        panic!(
            "libtorch at {} is version {version:?}, but tch 0.26 needs {TORCH_VERSION}; \
             run `cargo xtask setup`",
            lib.display()
        );
    }
}
