//! The README's recipe, run-time half: give this crate's binaries an rpath
//! to the libtorch that remat was built against (`remat` passes its folder
//! on as `DEP_REMAT_LIBTORCH_LIB`), so they start without LD_LIBRARY_PATH.
//! The other half, which libtorch to build against, is `.cargo/config.toml`.
//!
//! With the `cuda` feature it keeps libtorch_cuda linked, as remat's own
//! build scripts do: `--as-needed` would drop it (nothing references it)
//! and with it the registration of the CUDA backend.
//!
//! It also writes the training corpus (see `corpus`).

fn main() {
    if let Ok(lib) = std::env::var("DEP_REMAT_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    }
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        for arg in ["-Wl,--no-as-needed", "-ltorch_cuda", "-Wl,--as-needed"] {
            println!("cargo:rustc-link-arg={arg}");
        }
    }
    corpus::write();
}

mod corpus {
    include!("build_corpus.rs");
}
