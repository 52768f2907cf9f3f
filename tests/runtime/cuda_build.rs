//! The CUDA diagnostics (csrc/cuda_diag.cpp) are compiled in whenever the
//! `cuda` feature finds the CUDA headers, which `cargo xtask setup` installs
//! next to the CUDA wheel of torch, so CPU machines build and link them too.
//! Their error says which of the two things is missing: the build or the
//! device.

/// The CUDA headers the build script looks for in the torch wheel's folder.
fn wheel_has_cuda_headers() -> bool {
    let Some(libtorch) = option_env!("LIBTORCH") else {
        return false;
    };
    std::path::Path::new(libtorch)
        .join("../nvidia/cu13/include/crt/host_config.h")
        .is_file()
}

#[test]
// docs/semantics.md, rule D5 (E29).
fn cuda_diagnostics_are_built_with_the_feature_and_say_what_is_missing() {
    if tch::Cuda::is_available() {
        // A GPU machine: the diagnostics must work (the OOM observer only
        // prints when an allocation fails).
        if cfg!(feature = "cuda") {
            remat::diagnostics::attach_oom_observer()
                .expect("the CUDA diagnostics on a CUDA machine");
        }
        return;
    }
    let err = remat::diagnostics::attach_oom_observer()
        .unwrap_err()
        .to_string();
    if cfg!(feature = "cuda") && wheel_has_cuda_headers() {
        assert!(err.contains("no CUDA device is visible"), "{err}");
    } else {
        assert!(err.contains("has no CUDA diagnostics"), "{err}");
    }
}
