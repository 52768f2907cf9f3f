//! Compiles `csrc/dist.cpp` as remat_runtime compiles its bridge: with the
//! headers, C++ ABI and exception guard remat_runtime's build script passes
//! on (`DEP_REMAT_BRIDGE_INCLUDE`, `_CXX11_ABI`, `_CSRC`), so the rules for
//! finding libtorch live in one place (remat_runtime/build/libtorch.rs).
//!
//! c10d's Gloo header includes Gloo's own headers, which libtorch does not
//! ship: they come from `GLOO_INCLUDE` (in this repository `.gloo/include`,
//! which `cargo xtask setup` fetches) or the system (`libgloo-dev`).

use std::env;
use std::path::PathBuf;

const GLOO_HOW: &str = "remat_distributed needs Gloo's C++ headers (libtorch ships Gloo's code \
     but not its headers): in this repository run `cargo xtask setup`, which fetches them; \
     elsewhere install them (`apt install libgloo-dev` on Debian and Ubuntu) or set \
     GLOO_INCLUDE to a folder holding gloo/config.h";

fn main() {
    println!("cargo:rerun-if-changed=csrc/dist.cpp");
    println!("cargo:rerun-if-changed=csrc/dist.h");
    println!("cargo:rerun-if-env-changed=GLOO_INCLUDE");
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
        .compile("remat_distributed_bridge");
    // This crate's own tests run from target/.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
}
