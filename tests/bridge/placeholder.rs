use remat::autograd::{is_placeholder, placeholder, PlaceholderSpec};
use tch::{Device, Kind, Tensor};

const MSG: &str = "region `attention` output 0 was not kept; call recompute_needs_tensor";

fn make(sizes: &[i64]) -> Tensor {
    placeholder(
        &PlaceholderSpec::contiguous(sizes, Kind::Float, Device::Cpu),
        MSG,
    )
    .unwrap()
}

#[test]
// docs/semantics.md, rule P4: metadata and views work.
fn metadata_and_views_work() {
    let p = make(&[2, 3, 4]);
    assert_eq!(p.size(), [2, 3, 4]);
    assert_eq!(p.stride(), [12, 4, 1]);
    assert_eq!(p.kind(), Kind::Float);
    assert_eq!(p.device(), Device::Cpu);
    assert_eq!(p.view([6, 4]).size(), [6, 4]);
    assert_eq!(p.transpose(0, 2).size(), [4, 3, 2]);
    assert_eq!(p.select(0, 1).size(), [3, 4]);
    assert_eq!(remat::storage::storage_nbytes(&p), 2 * 3 * 4 * 4);
}

#[test]
// docs/semantics.md, rule P4: any data access fails with the message.
fn data_access_fails_with_the_message() {
    let p = make(&[2, 3]);
    let other = Tensor::ones([2, 3], tch::kind::FLOAT_CPU);
    let attempts = [
        ("sum", p.f_sum(Kind::Float).map(|_| ())),
        ("p + t", p.f_add(&other).map(|_| ())),
        ("t + p", other.f_add(&p).map(|_| ())),
        ("matmul", p.f_matmul(&other.tr()).map(|_| ())),
        (
            "contiguous of a transpose",
            p.tr().f_contiguous().map(|_| ()),
        ),
        (
            "copy from",
            Tensor::zeros([2, 3], tch::kind::FLOAT_CPU).f_copy_(&p),
        ),
        ("copy into", p.shallow_clone().f_copy_(&other)),
        ("zero_", p.shallow_clone().f_zero_().map(|_| ())),
    ];
    for (what, result) in attempts {
        let err = result.expect_err(what).to_string();
        assert!(err.contains(MSG), "{what}: {err}");
    }
}

#[test]
// docs/semantics.md, rule P4.
fn a_view_is_still_a_placeholder() {
    let p = make(&[4, 4]);
    assert!(is_placeholder(&p));
    let v = p.transpose(0, 1).narrow(0, 1, 2);
    assert!(is_placeholder(&v));
    assert!(v.f_sum(Kind::Float).unwrap_err().to_string().contains(MSG));
    assert!(!is_placeholder(&Tensor::ones([4, 4], tch::kind::FLOAT_CPU)));
    assert!(!is_placeholder(&Tensor::ones([0], tch::kind::FLOAT_CPU)));
}

#[test]
// docs/semantics.md, rule P4: even zero elements.
fn a_zero_element_placeholder_still_refuses_data() {
    let p = make(&[0, 3]);
    assert!(is_placeholder(&p));
    // Even with nothing to read, a data access fails with our message.
    let err = p.f_add(&p).unwrap_err().to_string();
    assert!(err.contains(MSG), "{err}");
}

#[test]
// docs/semantics.md, rule P4: no memory.
fn no_memory_is_allocated_for_a_large_one() {
    // 2^40 floats: 4 TiB declared. Creating it must not touch that memory.
    let p = make(&[1 << 20, 1 << 20]);
    assert_eq!(remat::storage::storage_nbytes(&p), 4 << 40);
    assert_eq!(p.view([-1]).size(), [1 << 40]);
}

#[test]
// docs/semantics.md, rule P4 (strides, offset, storage size).
fn spec_of_a_view_keeps_strides_and_offset() {
    let t = Tensor::arange(24, tch::kind::FLOAT_CPU).view([4, 6]);
    let v = t.narrow(1, 2, 3).transpose(0, 1);
    let spec = PlaceholderSpec::of(&v);
    let p = placeholder(&spec, MSG).unwrap();
    assert_eq!((p.size(), p.stride()), (v.size(), v.stride()));
    // Read through the bridge: tch 0.24 has no `Tensor::storage_offset`.
    assert_eq!(PlaceholderSpec::of(&p).storage_offset, 2);
    assert_eq!(remat::storage::storage_nbytes(&p), 24 * 4);
}

#[test]
fn bad_spec_is_an_error() {
    let mut spec = PlaceholderSpec::contiguous(&[2], Kind::Float, Device::Cpu);
    spec.strides.push(1);
    let err = placeholder(&spec, MSG).unwrap_err().to_string();
    assert!(err.contains("1 sizes but 2 strides"), "{err}");
    let spec = PlaceholderSpec::contiguous(&[2], Kind::Float, Device::Mps);
    assert!(placeholder(&spec, MSG)
        .unwrap_err()
        .to_string()
        .contains("CPU and CUDA"));
}
