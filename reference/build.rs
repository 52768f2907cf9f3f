//! Gives this crate's doc tests an rpath to libtorch: torch-sys records
//! none, and link arguments reach only the binaries of the package whose
//! build script prints them. The folder comes from `remat`'s build script
//! (`links = "remat"`, see the root build.rs).

fn main() {
    if let Ok(lib) = std::env::var("DEP_REMAT_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    }
}
