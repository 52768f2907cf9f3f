//! The reference model's block written once with the macros, its policy
//! chosen at run time: `#[checkpoint(enabled = ..)]` switches the checkpoint
//! off for `none`, and `region [policy]` gives each region its policy. The
//! same ATen ops in the same order as the runtime-API version in `model`, so
//! that losses and gradients compare bitwise.

use crate::model::{self as reference, Config, Model, ModelPolicy};
use remat::{checkpoint, remat, Capture, Policy};
use tch::Tensor;

/// How one block runs: checkpointed or not, and each region's policy
/// (reference-model.md, "Policies").
#[derive(Capture, Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPolicy {
    /// Whether the block is a checkpoint (`false` for `none`).
    pub checkpoint: bool,
    /// The policy of the `attention` region.
    pub attention: Policy,
    /// The policy of the `mlp` region.
    pub mlp: Policy,
}

impl BlockPolicy {
    /// The block policy of a model policy.
    pub fn of(policy: ModelPolicy) -> BlockPolicy {
        use Policy::{Recompute, Save};
        let (checkpoint, attention, mlp) = match policy {
            ModelPolicy::None => (false, Recompute, Recompute),
            ModelPolicy::Full => (true, Recompute, Recompute),
            ModelPolicy::Selective => (true, Save, Recompute),
            ModelPolicy::SaveMlp => (true, Recompute, Save),
            ModelPolicy::Auto => (true, Policy::Auto, Policy::Auto),
        };
        BlockPolicy {
            checkpoint,
            attention,
            mlp,
        }
    }
}

/// The sizes a block needs (`Config` is plain data, captured by copy).
#[derive(Capture, Clone, Copy)]
pub struct Dims {
    pub d: i64,
    pub h: i64,
    pub t: i64,
    pub b: i64,
}

#[derive(Capture)]
pub struct LayerNorm {
    pub weight: Tensor,
    pub bias: Tensor,
    pub d: i64,
}

impl LayerNorm {
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x.layer_norm([self.d], Some(&self.weight), Some(&self.bias), 1e-5, false)
    }
}

#[derive(Capture)]
pub struct Attention {
    pub qkv_w: Tensor,
    pub qkv_b: Tensor,
    pub proj_w: Tensor,
    pub proj_b: Tensor,
    pub dims: Dims,
}

impl Attention {
    pub fn forward(&self, h: &Tensor) -> Tensor {
        let Dims { d, h: heads, t, b } = self.dims;
        let cfg = Config {
            d,
            h: heads,
            t,
            b,
            l: 0,
        };
        reference::attention_op(
            h,
            [&self.qkv_w, &self.qkv_b, &self.proj_w, &self.proj_b],
            cfg,
        )
    }
}

#[derive(Capture)]
pub struct Mlp {
    pub fc1_w: Tensor,
    pub fc1_b: Tensor,
    pub fc2_w: Tensor,
    pub fc2_b: Tensor,
}

impl Mlp {
    pub fn forward(&self, h: &Tensor) -> Tensor {
        reference::mlp_op(h, [&self.fc1_w, &self.fc1_b, &self.fc2_w, &self.fc2_b])
    }
}

/// One transformer block; `#[derive(Capture)]` lets a checkpoint own a
/// shallow copy of it.
#[derive(Capture)]
pub struct Block {
    pub index: usize,
    pub ln1: LayerNorm,
    pub attention: Attention,
    pub ln2: LayerNorm,
    pub mlp: Mlp,
}

impl Block {
    /// Handles to the parameters of a reference block (the same tensors).
    pub fn of(p: &reference::Block) -> Block {
        let Config { d, h, t, b, .. } = p.cfg;
        let s = Tensor::shallow_clone;
        Block {
            index: p.index,
            ln1: LayerNorm {
                weight: s(&p.ln1_w),
                bias: s(&p.ln1_b),
                d,
            },
            attention: Attention {
                qkv_w: s(&p.qkv_w),
                qkv_b: s(&p.qkv_b),
                proj_w: s(&p.proj_w),
                proj_b: s(&p.proj_b),
                dims: Dims { d, h, t, b },
            },
            ln2: LayerNorm {
                weight: s(&p.ln2_w),
                bias: s(&p.ln2_b),
                d,
            },
            mlp: Mlp {
                fc1_w: s(&p.fc1_w),
                fc1_b: s(&p.fc1_b),
                fc2_w: s(&p.fc2_w),
                fc2_b: s(&p.fc2_b),
            },
        }
    }

    /// The block under `policy`: one body for every policy. Both outputs
    /// are marked before the residual adds read them (`needs` does nothing
    /// for a region that runs as `recompute`).
    #[checkpoint(
        name = [format!("layers.{}", self.index)],
        enabled = policy.checkpoint,
    )]
    pub fn forward(&self, x: &Tensor, policy: BlockPolicy) -> Tensor {
        let h = self.ln1.forward(x);
        remat! {
            let attn = region [policy.attention] attention: self.attention.forward(&h);
            needs attn;                       // the residual add reads attn
            let x = x + &attn;
            let m = region [policy.mlp] mlp: self.mlp.forward(&self.ln2.forward(&x));
            needs m;                          // and m
        }
        x + m
    }
}

/// The loss of `model`'s parameters with the blocks written with the
/// macros, op for op as the runtime-API version (`Model::loss_api`).
pub fn loss(model: &Model, tokens: &Tensor, targets: &Tensor, policy: ModelPolicy) -> Tensor {
    if policy == ModelPolicy::Auto {
        // A plan decides the checkpoint's on/off too (`#[checkpoint(auto)]`),
        // which `enabled = bool` cannot say: the runtime-API blocks run it,
        // with the same regions and names.
        return model.loss_api(tokens, targets, policy);
    }
    let policy = BlockPolicy::of(policy);
    let blocks: Vec<Block> = model.blocks.iter().map(Block::of).collect();
    model.loss_through(tokens, targets, |mut x| {
        // Scopes only label the trace; `[expr]` names them at run time.
        remat! {
            scope blocks {
                for block in &blocks {
                    remat! {
                        scope [format!("layers.{}", block.index)] {
                            x = block.forward(&x, policy);
                        }
                    }
                }
            }
        }
        x
    })
}
