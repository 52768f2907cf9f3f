//! The reference model sharded as these tests shard it: each block a unit
//! named after its checkpoint (`layers.{i}`), the rest the `root` unit.

use remat_distributed::{FsdpOptions, FullyShardedDataParallel, ProcessGroup};
use remat_reference::model::{block_forward, Model, ModelPolicy};
use tch::Tensor;

/// The blocks' unit names, in order.
pub fn block_units(model: &Model) -> Vec<String> {
    model
        .blocks
        .iter()
        .map(|b| format!("layers.{}", b.index))
        .collect()
}

/// `model` sharded on `group`: a unit per block, then `root`.
pub fn shard(
    group: &ProcessGroup,
    model: &Model,
    options: FsdpOptions,
) -> FullyShardedDataParallel {
    let names = block_units(model);
    let units: Vec<&str> = names.iter().map(String::as_str).collect();
    FullyShardedDataParallel::from_var_store(group, &model.vs, &units, options).unwrap()
}

/// The loss under `policy`: the root unit around the model, each block's
/// unit around its checkpoint (rule F3).
pub fn sharded_loss(
    fsdp: &FullyShardedDataParallel,
    model: &Model,
    (tokens, targets): (&Tensor, &Tensor),
    policy: ModelPolicy,
) -> Tensor {
    let names = block_units(model);
    fsdp.unit("root", || {
        model.loss_through(tokens, targets, |mut x| {
            for (block, name) in model.blocks.iter().zip(&names) {
                x = fsdp
                    .unit(name, || block_forward(block, &x, policy))
                    .unwrap();
            }
            x
        })
    })
    .unwrap()
}
