//! The reference model (shared/design/reference-model.md) written with the
//! macros: the same ATen ops in the same order as `tests/common/model.rs`,
//! so that losses and gradients compare bitwise.

use crate::model::{self as reference, Config, Model};
use remat::{checkpoint, remat, Capture};
use tch::Tensor;

/// The policies that place regions in the block (reference-model.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacroPolicy {
    /// `attention` a `save` region, marked before the residual add; the MLP
    /// a `recompute` region.
    Selective,
    /// `attention` a `recompute` region; the MLP a `save` region, marked
    /// before its residual add.
    SaveMlp,
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

    /// `selective`, exactly as dsl.md writes it.
    #[checkpoint(name = [format!("layers.{}", self.index)])]
    pub fn selective(&self, x: &Tensor) -> Tensor {
        let h = self.ln1.forward(x);
        remat! {
            let attn = save attention: self.attention.forward(&h);
            needs attn;                       // bare code below reads attn
            let x = x + &attn;
            let m = recompute mlp: self.mlp.forward(&self.ln2.forward(&x));
        }
        x + m
    }

    /// `save_mlp`: the MLP's output is kept, the attention replayed.
    #[checkpoint(name = [format!("layers.{}", self.index)])]
    pub fn save_mlp(&self, x: &Tensor) -> Tensor {
        let h = self.ln1.forward(x);
        remat! {
            let attn = recompute attention: self.attention.forward(&h);
            let x = x + &attn;
            let m = save mlp: self.mlp.forward(&self.ln2.forward(&x));
            needs m;                          // the residual add reads m
        }
        x + m
    }

    pub fn forward(&self, x: &Tensor, policy: MacroPolicy) -> Tensor {
        match policy {
            MacroPolicy::Selective => self.selective(x),
            MacroPolicy::SaveMlp => self.save_mlp(x),
        }
    }
}

/// The loss of `model`'s parameters with the blocks run through the macro
/// version, op for op as `Model::loss`.
pub fn loss(model: &Model, tokens: &Tensor, targets: &Tensor, policy: MacroPolicy) -> Tensor {
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
