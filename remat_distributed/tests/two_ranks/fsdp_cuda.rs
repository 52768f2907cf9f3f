//! Sharded units on a GPU (docs/gpu.md, "Sharded data parallel"): a world
//! of one over NCCL on `cuda:0`, the model's parameters freed and gathered
//! through the CUDA caching allocator, hooks run on autograd's device
//! thread. Skipped (and saying so) without the `cuda` feature or a device;
//! run on a GPU machine with `cargo test -p remat_distributed --features
//! cuda --test two_ranks fsdp_cuda`.

use crate::launch::{free_port, seeded};
use crate::sharded_model::{shard, sharded_loss};
use remat_distributed::{Backend, FsdpOptions, InitOptions, ProcessGroup};
use remat_reference::model::{batch_on, Config, Model, ModelPolicy, SMALL};
use tch::{COptimizer, Device, Tensor};

const STEPS: usize = 3;
const CFG: Config = SMALL;

fn adamw(params: &[Tensor]) -> COptimizer {
    let mut opt = COptimizer::adamw(1e-2, 0.9, 0.999, 0.01, 1e-8, false).unwrap();
    for p in params {
        opt.add_parameters(p, 0).unwrap();
    }
    opt
}

fn bits(named: Vec<(String, Tensor)>) -> Vec<(String, Vec<u32>)> {
    let mut out: Vec<(String, Vec<u32>)> = named
        .into_iter()
        .map(|(n, t)| {
            let v = Vec::<f32>::try_from(t.to_device(Device::Cpu).flatten(0, -1)).unwrap();
            (n, v.into_iter().map(f32::to_bits).collect())
        })
        .collect();
    out.sort();
    out
}

/// The parameters after a few steps of the plain model on `device`.
fn plain(device: Device) -> Vec<(String, Vec<u32>)> {
    let model = seeded(|| Model::on(CFG, 0, device));
    let (tokens, targets) = batch_on(CFG, 1, device);
    let params: Vec<Tensor> = model
        .named_parameters()
        .into_iter()
        .map(|(_, t)| t.shallow_clone())
        .collect();
    let opt = adamw(&params);
    for _ in 0..STEPS {
        opt.zero_grad().unwrap();
        model
            .loss_api(&tokens, &targets, ModelPolicy::None)
            .backward();
        opt.step().unwrap();
    }
    bits(
        model
            .named_parameters()
            .into_iter()
            .map(|(n, t)| (n, t.detach().copy()))
            .collect(),
    )
}

/// The same steps sharded in a world of one over NCCL, each block a unit
/// around its `full` checkpoint.
fn sharded(device: Device, offload_shards: bool) -> Vec<(String, Vec<u32>)> {
    let backend = if device.is_cuda() {
        Backend::Nccl
    } else {
        Backend::Gloo
    };
    let group =
        ProcessGroup::init(&InitOptions::new(0, 1, "127.0.0.1", free_port()).backend(backend))
            .unwrap();
    let model = seeded(|| Model::on(CFG, 0, device));
    let (tokens, targets) = batch_on(CFG, 1, device);
    let options = FsdpOptions {
        offload_shards,
        ..FsdpOptions::default()
    };
    let fsdp = shard(&group, &model, options);
    let shards: Vec<Tensor> = fsdp
        .units()
        .iter()
        .map(|u| fsdp.shard(u).unwrap())
        .collect();
    let opt = adamw(&shards);
    for _ in 0..STEPS {
        opt.zero_grad().unwrap();
        let loss = sharded_loss(&fsdp, &model, (&tokens, &targets), ModelPolicy::Full);
        fsdp.backward(&loss).unwrap();
        assert_eq!(fsdp.gathered_bytes().unwrap(), 0);
        opt.step().unwrap();
    }
    bits(fsdp.full_state_dict().unwrap())
}

/// docs/semantics.md, rules F1-F5 and F8 on a GPU: bitwise the plain
/// model's parameters after three AdamW steps, shards on the device and
/// offloaded to the CPU.
#[test]
fn fsdp_cuda_world_of_one_over_nccl_trains_as_the_plain_model() {
    let device = if cfg!(feature = "cuda") && tch::Cuda::is_available() {
        if std::env::var_os("CUBLAS_WORKSPACE_CONFIG").is_none() {
            std::env::set_var("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
        }
        remat::diagnostics::device::set_deterministic_algorithms(true).unwrap();
        Device::Cuda(0)
    } else {
        // The same logic on the CPU over Gloo, so that it is checked here.
        println!("fsdp_cuda: skipped: no CUDA device (or no `cuda` feature); checked on the CPU");
        Device::Cpu
    };
    let want = plain(device);
    for offload in [false, true] {
        let got = sharded(device, offload);
        for ((name, a), (_, b)) in want.iter().zip(&got) {
            assert!(
                a == b,
                "offload_shards={offload}: `{name}` differs from the plain model's"
            );
        }
    }
}
