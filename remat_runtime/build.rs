//! Compiles the C++ bridge against the libtorch that `torch-sys` found,
//! with the headers and C++ ABI torch-sys used (`build/libtorch.rs`).
//!
//! With the `doc-only` feature (docs.rs), or when torch-sys itself was
//! built `doc-only` and so found no libtorch, nothing is compiled or
//! linked: the Rust code still type-checks and documents.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build/libtorch.rs"]
mod libtorch;

struct CargoEnv;

impl libtorch::BuildEnv for CargoEnv {
    fn var(&self, name: &str) -> Option<String> {
        println!("cargo:rerun-if-env-changed={name}");
        env::var(name).ok()
    }

    fn python(&self, script: &str) -> Result<String, String> {
        // torch-sys's choice: the venv's `python` when one is active.
        let python = if env::var_os("VIRTUAL_ENV").is_some() {
            "python"
        } else {
            "python3"
        };
        let out = Command::new(python)
            .args(["-c", script])
            .output()
            .map_err(|e| format!("could not run {python}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{python} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build/libtorch.rs");
    if env::var_os("CARGO_FEATURE_DOC_ONLY").is_some() {
        return;
    }
    let Ok(lib) = env::var("DEP_TCH_LIBTORCH_LIB") else {
        // torch-sys reports its lib/ folder whenever it found libtorch, and
        // fails the build when it did not, unless it is `doc-only`.
        println!(
            "cargo:warning=remat: torch-sys found no libtorch (is tch's `doc-only` on?); the \
             C++ bridge is not built and nothing will link. {}",
            libtorch::HOW_TO_SET
        );
        return;
    };
    let torch = libtorch::find(Path::new(&lib), &CargoEnv).unwrap_or_else(|e| panic!("{e}"));
    let lib = torch.lib.clone();

    println!("cargo:rerun-if-changed=csrc/bridge.cpp");
    println!("cargo:rerun-if-changed=csrc/bridge.h");
    println!("cargo:rerun-if-changed=csrc/guard.h");
    println!("cargo:rerun-if-changed=csrc/cuda_diag.cpp");
    println!("cargo:rerun-if-changed=csrc/cuda_offload.cpp");
    println!("cargo:rerun-if-changed=csrc/autocast.cpp");
    println!("cargo:rerun-if-changed=csrc/memory_trace.cpp");
    println!("cargo:rerun-if-changed=csrc/generators.cpp");
    println!("cargo:rerun-if-changed=csrc/early_stop.cpp");
    println!("cargo:rerun-if-changed=csrc/placeholder.h");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    let cuda = env::var_os("CARGO_FEATURE_CUDA").is_some();

    let mut build = cc::Build::new();
    build.cpp(true).pic(true).std("c++17");
    for dir in &torch.includes {
        build
            .flag("-isystem")
            .flag(dir.to_str().expect("libtorch include path is not UTF-8"));
    }
    build
        .define("_GLIBCXX_USE_CXX11_ABI", torch.cxx11_abi.as_str())
        .flag_if_supported("-Wno-unused-parameter")
        .file("csrc/bridge.cpp")
        .file("csrc/autocast.cpp")
        .file("csrc/memory_trace.cpp")
        .file("csrc/generators.cpp")
        .file("csrc/early_stop.cpp");
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
                    .file("csrc/cuda_diag.cpp")
                    .file("csrc/cuda_offload.cpp");
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
    // What a crate with C++ of its own against libtorch (remat_distributed)
    // needs to compile as the bridge does, without re-deriving it:
    // `DEP_REMAT_BRIDGE_INCLUDE` (joined as PATH is), `_CXX11_ABI`, `_CSRC`.
    let includes = env::join_paths(&torch.includes).expect("libtorch include path holds a ':'");
    println!("cargo:include={}", includes.to_string_lossy());
    println!("cargo:cxx11_abi={}", torch.cxx11_abi);
    let csrc = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("csrc");
    println!("cargo:csrc={}", csrc.display());

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
