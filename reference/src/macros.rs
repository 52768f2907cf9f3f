//! The reference model's block written once with the macros, its policy
//! chosen at run time: `#[checkpoint(enabled = ..)]` switches the checkpoint
//! off for `none`, and `region [policy]` gives each region its policy. The
//! same ATen ops in the same order as the runtime-API version in
//! `runtime_api`, on the same parameters, so that losses and gradients
//! compare bitwise. `model` calls [`loss`] for `Model::loss`.
//!
//! ```
//! use remat_reference::macros::loss;
//! use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
//! let model = Model::new(SMALL, 0);
//! let (tokens, targets) = batch(SMALL, 1);
//! loss(&model, &tokens, &targets, ModelPolicy::Selective).backward();
//! ```

use crate::runtime_api::{self as reference, Config, Model, ModelPolicy};
use remat::{checkpoint, remat, Capture, Policy};
use tch::Tensor;

/// How one block runs: checkpointed or not, and each region's policy
/// (docs/reference-model.md, "Policies").
///
/// ```
/// use remat::Policy;
/// use remat_reference::{macros::BlockPolicy, ModelPolicy};
/// let selective = BlockPolicy::of(ModelPolicy::Selective);
/// assert_eq!((selective.attention, selective.mlp), (Policy::Save, Policy::Recompute));
/// ```
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
    ///
    /// ```
    /// use remat_reference::{macros::BlockPolicy, ModelPolicy};
    /// assert!(!BlockPolicy::of(ModelPolicy::None).checkpoint);
    /// ```
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

/// The sizes a block needs (plain data, captured by copy).
///
/// ```
/// use remat_reference::{macros::Block, Model, SMALL};
/// let block = Block::of(&Model::new(SMALL, 0).blocks[0]);
/// assert_eq!(block.attention.dims.h, SMALL.h);
/// ```
#[derive(Capture, Clone, Copy)]
pub struct Dims {
    /// Model width.
    pub d: i64,
    /// Attention heads.
    pub h: i64,
    /// Sequence length.
    pub t: i64,
    /// Batch size.
    pub b: i64,
}

/// A layer norm over the last dimension `d`.
///
/// ```
/// use remat_reference::{macros::Block, Model, SMALL};
/// let block = Block::of(&Model::new(SMALL, 0).blocks[0]);
/// assert_eq!(block.ln1.d, SMALL.d);
/// ```
#[derive(Capture)]
pub struct LayerNorm {
    /// `ln*.weight`, `[d]`.
    pub weight: Tensor,
    /// `ln*.bias`, `[d]`.
    pub bias: Tensor,
    /// The normalised width.
    pub d: i64,
}

impl LayerNorm {
    /// `x` normalised over its last dimension (`reference::ln`'s op).
    ///
    /// ```
    /// use remat_reference::{macros::Block, model::ln, Model, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let (p, block) = (&model.blocks[0], Block::of(&model.blocks[0]));
    /// let x = tch::Tensor::ones([2, SMALL.d], tch::kind::FLOAT_CPU);
    /// assert!(block.ln1.forward(&x).equal(&ln(&x, &p.ln1_w, &p.ln1_b, SMALL.d)));
    /// ```
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x.layer_norm([self.d], Some(&self.weight), Some(&self.bias), 1e-5, false)
    }
}

/// The attention's weights and sizes.
///
/// ```
/// use remat_reference::{macros::Block, Model, SMALL};
/// let block = Block::of(&Model::new(SMALL, 0).blocks[0]);
/// assert_eq!(block.attention.qkv_w.size(), [3 * SMALL.d, SMALL.d]);
/// ```
#[derive(Capture)]
pub struct Attention {
    /// `attn.qkv.weight`.
    pub qkv_w: Tensor,
    /// `attn.qkv.bias`.
    pub qkv_b: Tensor,
    /// `attn.proj.weight`.
    pub proj_w: Tensor,
    /// `attn.proj.bias`.
    pub proj_b: Tensor,
    /// The sizes.
    pub dims: Dims,
}

impl Attention {
    /// The attention of `h` (`reference::attention_op`, the same ops).
    ///
    /// ```
    /// use remat_reference::{macros::Block, model::attention, Model, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let block = Block::of(&model.blocks[0]);
    /// let h = tch::Tensor::ones([SMALL.b, SMALL.t, SMALL.d], tch::kind::FLOAT_CPU);
    /// assert!(block.attention.forward(&h).equal(&attention(&model.blocks[0], &h)));
    /// ```
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

/// The MLP's weights.
///
/// ```
/// use remat_reference::{macros::Block, Model, SMALL};
/// let block = Block::of(&Model::new(SMALL, 0).blocks[0]);
/// assert_eq!(block.mlp.fc1_w.size(), [4 * SMALL.d, SMALL.d]);
/// ```
#[derive(Capture)]
pub struct Mlp {
    /// `mlp.fc1.weight`.
    pub fc1_w: Tensor,
    /// `mlp.fc1.bias`.
    pub fc1_b: Tensor,
    /// `mlp.fc2.weight`.
    pub fc2_w: Tensor,
    /// `mlp.fc2.bias`.
    pub fc2_b: Tensor,
}

impl Mlp {
    /// The MLP of `h` (`reference::mlp_op`, the same ops).
    ///
    /// ```
    /// use remat_reference::{macros::Block, model::mlp, Model, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let block = Block::of(&model.blocks[0]);
    /// let h = tch::Tensor::ones([3, SMALL.d], tch::kind::FLOAT_CPU);
    /// assert!(block.mlp.forward(&h).equal(&mlp(&model.blocks[0], &h)));
    /// ```
    pub fn forward(&self, h: &Tensor) -> Tensor {
        reference::mlp_op(h, [&self.fc1_w, &self.fc1_b, &self.fc2_w, &self.fc2_b])
    }
}

/// One transformer block; `#[derive(Capture)]` lets a checkpoint own a
/// shallow copy of it.
///
/// ```
/// use remat::Capture;
/// use remat_reference::{macros::Block, Model, SMALL};
/// let model = Model::new(SMALL, 0);
/// let owned = Block::of(&model.blocks[0]).capture(); // the same tensors
/// assert_eq!(owned.mlp.fc2_w.data_ptr(), model.blocks[0].fc2_w.data_ptr());
/// ```
#[derive(Capture)]
pub struct Block {
    /// The block's position; it names the checkpoint (`layers.{index}`).
    pub index: usize,
    /// The first layer norm.
    pub ln1: LayerNorm,
    /// The attention.
    pub attention: Attention,
    /// The second layer norm.
    pub ln2: LayerNorm,
    /// The MLP.
    pub mlp: Mlp,
}

impl Block {
    /// Handles to the parameters of a reference block (the same tensors).
    ///
    /// ```
    /// use remat_reference::{macros::Block, Model, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// assert_eq!(Block::of(&model.blocks[1]).index, 1);
    /// ```
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
    ///
    /// ```
    /// use remat_reference::macros::{Block, BlockPolicy};
    /// use remat_reference::model::{block_body, Model, ModelPolicy, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let block = Block::of(&model.blocks[0]);
    /// let x = tch::Tensor::ones([SMALL.b, SMALL.t, SMALL.d], tch::kind::FLOAT_CPU);
    /// let y = block.forward(&x, BlockPolicy::of(ModelPolicy::SaveMlp));
    /// assert!(y.equal(&block_body(&model.blocks[0], &x, ModelPolicy::None)));
    /// ```
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
/// macros, op for op as the runtime-API version (`Model::loss_api`); for
/// `Auto`, that version's blocks (see the comment inside).
///
/// ```
/// use remat_reference::macros::loss;
/// use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
/// let model = Model::new(SMALL, 0);
/// let (tokens, targets) = batch(SMALL, 1);
/// let api = model.loss_api(&tokens, &targets, ModelPolicy::Full);
/// assert!(loss(&model, &tokens, &targets, ModelPolicy::Full).equal(&api));
/// ```
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
