// The README's two lines: an rpath to the libtorch remat was built against.
fn main() {
    if let Ok(lib) = std::env::var("DEP_REMAT_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    }
}
