//! `Backend::Nccl` (docs/semantics.md, rule W2): refused with the reason
//! where it cannot run, a working group of one where it can.

use crate::launch::free_port;
use remat_distributed::{Backend, Error, InitOptions, ProcessGroup, ReduceOp};

/// Without the `cuda` feature the build is named; with it, on a machine
/// without a CUDA device, the missing device is; with one, a world of one
/// reduces a CUDA tensor through NCCL.
#[test]
fn nccl_runs_where_it_can_and_says_why_not_elsewhere() {
    let opts = InitOptions::new(0, 1, "127.0.0.1", free_port()).backend(Backend::Nccl);
    let result = ProcessGroup::init(&opts);
    if !cfg!(feature = "cuda") {
        match result {
            Err(Error::NotBuilt(msg)) => assert!(
                msg.contains("remat_distributed was built without the `cuda` feature"),
                "{msg}"
            ),
            Err(other) => panic!("not a NotBuilt error: {other}"),
            Ok(_) => panic!("a build without the `cuda` feature formed an NCCL group"),
        }
    } else if !tch::Cuda::is_available() {
        match result {
            Err(Error::Config(msg)) => {
                assert!(
                    msg.contains("NCCL needs a CUDA device; none is visible"),
                    "{msg}"
                )
            }
            Err(other) => panic!("not a Config error: {other}"),
            Ok(_) => panic!("an NCCL group formed without a CUDA device"),
        }
    } else {
        let group = result.unwrap();
        let device = tch::Device::Cuda(0);
        let mut t = tch::Tensor::from_slice(&[1.0f32, 2.0]).to_device(device);
        group.all_reduce(&mut t, ReduceOp::Sum).unwrap();
        assert_eq!(
            Vec::<f32>::try_from(t.to_device(tch::Device::Cpu)).unwrap(),
            [1.0, 2.0]
        );
        group.barrier().unwrap();
    }
}
