//! The README's recipe, run-time half: give this crate's binaries an rpath
//! to the libtorch that remat was built against (`remat` passes its folder
//! on as `DEP_REMAT_LIBTORCH_LIB`), so they start without LD_LIBRARY_PATH.
//! The other half, which libtorch to build against, is `.cargo/config.toml`.
//!
//! It also writes the training corpus (see `corpus`).

fn main() {
    if let Ok(lib) = std::env::var("DEP_REMAT_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    }
    corpus::write();
}

mod corpus {
    include!("build_corpus.rs");
}
