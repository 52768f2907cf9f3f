//! Gives this package's tests, examples and benches an rpath to libtorch,
//! and with the `cuda` feature keeps libtorch_cuda linked.
//!
//! torch-sys links libtorch dynamically but records no run-time search path,
//! and cargo overrides `LD_LIBRARY_PATH` for test processes. remat_runtime's
//! build script passes the libtorch folder on (`links = "remat_bridge"`).
//! Link arguments only reach the binaries of the package whose build script
//! prints them, so a binary crate of yours needs the same few lines: this
//! script passes the folder on to crates that depend on `remat`
//! (`links = "remat"`), as `DEP_REMAT_LIBTORCH_LIB` in their build scripts.

fn main() {
    if let Ok(lib) = std::env::var("DEP_REMAT_BRIDGE_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
        println!("cargo:libtorch_lib={lib}");
    }
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        // `--as-needed` would drop libtorch_cuda.so: nothing references it,
        // but its static initialisers register the CUDA backend.
        for arg in ["-Wl,--no-as-needed", "-ltorch_cuda", "-Wl,--as-needed"] {
            println!("cargo:rustc-link-arg={arg}");
        }
    }
}
