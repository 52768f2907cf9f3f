//! The README's recipe, run-time half: an rpath to the libtorch remat was
//! built against, so the binary starts without LD_LIBRARY_PATH.

fn main() {
    if let Ok(lib) = std::env::var("DEP_REMAT_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    }
}
