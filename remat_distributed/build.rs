//! Compiles `csrc/dist.cpp` as remat_runtime compiles its bridge: with the
//! headers, C++ ABI and exception guard remat_runtime's build script passes
//! on (`DEP_REMAT_BRIDGE_INCLUDE`, `_CXX11_ABI`, `_CSRC`), so the rules for
//! finding libtorch live in one place (remat_runtime/build/libtorch.rs).
//!
//! c10d's Gloo header includes Gloo's own headers, which libtorch does not
//! ship: they come from `GLOO_INCLUDE` (in this repository `.gloo/include`,
//! which `cargo xtask setup` fetches) or the system (`libgloo-dev`).

use std::env;
use std::path::{Path, PathBuf};

const GLOO_HOW: &str = "remat_distributed needs Gloo's C++ headers (libtorch ships Gloo's code \
     but not its headers): in this repository run `cargo xtask setup`, which fetches them; \
     elsewhere install them (`apt install libgloo-dev` on Debian and Ubuntu) or set \
     GLOO_INCLUDE to a folder holding gloo/config.h";

fn main() {
    println!("cargo:rerun-if-changed=csrc/dist.cpp");
    println!("cargo:rerun-if-changed=csrc/dist.h");
    println!("cargo:rerun-if-changed=csrc/fsdp.cpp");
    println!("cargo:rerun-if-changed=csrc/group.h");
    println!("cargo:rerun-if-changed=csrc/nccl.cpp");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    println!("cargo:rerun-if-env-changed=GLOO_INCLUDE");
    // Set by `nccl` when NCCL is compiled in.
    println!("cargo:rustc-check-cfg=cfg(remat_nccl)");
    let (Ok(includes), Ok(abi), Ok(csrc), Ok(lib)) = (
        env::var("DEP_REMAT_BRIDGE_INCLUDE"),
        env::var("DEP_REMAT_BRIDGE_CXX11_ABI"),
        env::var("DEP_REMAT_BRIDGE_CSRC"),
        env::var("DEP_REMAT_BRIDGE_LIBTORCH_LIB"),
    ) else {
        // remat_runtime built no bridge (doc-only, or no libtorch): it
        // has said why; nothing here can link either.
        return;
    };
    println!("cargo:rerun-if-changed={csrc}/guard.h");
    let candidates: Vec<PathBuf> = env::var_os("GLOO_INCLUDE")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("/usr/include")])
        .collect();
    let Some(gloo) = candidates
        .iter()
        .find(|dir| dir.join("gloo/config.h").exists())
        .cloned()
    else {
        let looked: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
        panic!("no gloo/config.h under {}. {GLOO_HOW}", looked.join(" or "));
    };

    let mut build = cc::Build::new();
    build.cpp(true).pic(true).std("c++17");
    for dir in env::split_paths(&includes) {
        build
            .flag("-isystem")
            .flag(dir.to_str().expect("libtorch include path is not UTF-8"));
    }
    build
        // After the system folders: `-isystem /usr/include` would break the
        // C library's `#include_next`.
        .flag("-idirafter")
        .flag(gloo.to_str().expect("GLOO_INCLUDE is not UTF-8"))
        .include(&csrc)
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        // c10d's headers declare the Gloo process group only with this set,
        // as libtorch itself was built.
        .define("USE_C10D_GLOO", None)
        .flag_if_supported("-Wno-unused-parameter")
        .file("csrc/dist.cpp")
        .file("csrc/fsdp.cpp");
    if env::var_os("CARGO_FEATURE_CUDA").is_some() {
        nccl(&mut build, Path::new(&lib));
    }
    build.compile("remat_distributed_bridge");
    // This crate's own tests run from target/.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
}

/// Adds `csrc/nccl.cpp` (c10d's ProcessGroupNCCL) to the build when the
/// headers it needs are found: NCCL's, the CUDA runtime's and CCCL's
/// (`nv/target`, which `cuda_fp16.h` includes), from the torch wheel's
/// `nvidia` packages beside libtorch (`site-packages/nvidia/*/include`),
/// `CUDA_HOME`, or `CCCL_INCLUDE` (the torch wheel does not depend on
/// `nvidia-cuda-cccl`). Without them the crate builds without NCCL, says
/// so here, and `Backend::Nccl` returns an error naming what is missing.
/// The code is libtorch_cuda's.
fn nccl(build: &mut cc::Build, lib: &Path) {
    println!("cargo:rerun-if-env-changed=CCCL_INCLUDE");
    let nvidia = lib.join("../../nvidia");
    println!("cargo:rerun-if-changed={}", nvidia.display());
    let mut wheel: Vec<PathBuf> = std::fs::read_dir(&nvidia)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path().join("include"))
                .collect()
        })
        .unwrap_or_default();
    wheel.sort();
    let mut candidates: Vec<PathBuf> = ["CCCL_INCLUDE"]
        .iter()
        .filter_map(env::var_os)
        .map(PathBuf::from)
        .collect();
    candidates.extend(
        ["CUDA_HOME", "CUDA_PATH"]
            .iter()
            .filter_map(env::var_os)
            .map(|home| PathBuf::from(home).join("include")),
    );
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    candidates.extend(wheel);
    let find = |file: &str| candidates.iter().find(|d| d.join(file).exists()).cloned();
    let needed = ["nccl.h", "cuda_runtime_api.h", "nv/target"];
    let found: Vec<Option<PathBuf>> = needed.iter().map(|f| find(f)).collect();
    let missing: Vec<&str> = needed
        .iter()
        .zip(&found)
        .filter(|(_, dir)| dir.is_none())
        .map(|(f, _)| *f)
        .collect();
    println!("cargo:rustc-env=REMAT_NCCL_MISSING={}", missing.join(", "));
    if !missing.is_empty() {
        println!(
            "cargo:warning=remat_distributed: no {} found (looked in CCCL_INCLUDE, CUDA_HOME, \
             /usr/local/cuda and {}/*/include): Backend::Nccl is left out of this build",
            missing.join(", "),
            nvidia.display()
        );
        return;
    }
    let mut dirs: Vec<PathBuf> = found.into_iter().flatten().collect();
    dirs.dedup();
    for dir in dirs {
        build
            .flag("-isystem")
            .flag(dir.to_str().expect("CUDA include path is not UTF-8"));
    }
    build
        .define("USE_C10D_NCCL", None)
        .define("REMAT_NCCL", None)
        .file("csrc/nccl.cpp");
    println!("cargo:rustc-cfg=remat_nccl");
    // ProcessGroupNCCL's code; link-lib (unlike link-arg) reaches every
    // binary that depends on this crate.
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=torch_cuda");
    println!("cargo:rustc-link-lib=dylib=c10_cuda");
}
