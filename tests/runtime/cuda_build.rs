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

#[test]
// docs/semantics.md, rule D7 (E35, and E29 for the CUDA calls off CUDA).
fn devices_are_read_from_their_names_and_cuda_calls_say_what_is_missing() {
    use remat::diagnostics::device::{
        cuda_memory, current_stream, on_side_stream, parse, reset_cuda_peak,
    };
    use tch::Device;
    assert_eq!(parse("cpu").unwrap(), Device::Cpu);
    for bad in ["gpu", "cuda:", "cuda:x", "cuda0", ""] {
        let err = parse(bad).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("device: `{bad}` is not a device; give cpu, cuda or cuda:N")
        );
    }
    let visible = if tch::Cuda::is_available() {
        tch::Cuda::device_count() as usize
    } else {
        0
    };
    let beyond = format!("cuda:{visible}");
    let err = parse(&beyond).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("device: `{beyond}` is not available: ")),
        "{err}"
    );
    if visible == 0 {
        assert!(err.contains("no CUDA device is visible"), "{err}");
        assert!(parse("cuda").is_err());
        let cuda = Device::Cuda(0);
        for err in [
            cuda_memory(cuda).unwrap_err(),
            reset_cuda_peak(cuda).unwrap_err(),
            current_stream(cuda).unwrap_err(),
            on_side_stream(cuda, |_| ()).unwrap_err(),
        ] {
            assert!(
                err.to_string()
                    .contains("needs CUDA, but no CUDA device is visible"),
                "{err}"
            );
        }
    } else {
        assert_eq!(parse("cuda").unwrap(), Device::Cuda(0));
    }
    let err = cuda_memory(Device::Cpu).unwrap_err().to_string();
    assert_eq!(err, "cuda_memory needs CUDA: Cpu is not a CUDA device");
}
