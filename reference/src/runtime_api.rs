//! The reference model (docs/reference-model.md): a GPT-style
//! byte-level language model written with the functional ops the design
//! fixes, its parameters and sizes, and its blocks under each checkpointing
//! policy written with the runtime API (`checkpoint`, `region`).
//!
//! The bottom of the crate: `macros` writes the same blocks with the macros
//! on these parameters and ops, and `model` (which re-exports everything
//! here) adds the loss through those blocks; nothing here refers to either.
//!
//! ```
//! use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
//! let model = Model::new(SMALL, 0);
//! let (tokens, targets) = batch(SMALL, 1);
//! model.loss_api(&tokens, &targets, ModelPolicy::Full).backward();
//! ```

use remat::{checkpoint, recompute_needs_tensor, region, Policy};
use tch::{nn, Device, Kind, Tensor};

/// The sizes of the model (docs/reference-model.md, "Sizes").
///
/// ```
/// use remat_reference::model::{Config, SMALL};
/// let wide = Config { d: 128, ..SMALL };
/// assert_eq!(wide.d % wide.h, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Model width.
    pub d: i64,
    /// Attention heads.
    pub h: i64,
    /// Sequence length.
    pub t: i64,
    /// Batch size.
    pub b: i64,
    /// Layers (blocks).
    pub l: i64,
}

/// D=64, H=4, T=32, B=2, L=2: tests and the demo.
///
/// ```
/// assert_eq!(remat_reference::model::SMALL.l, 2);
/// ```
pub const SMALL: Config = Config {
    d: 64,
    h: 4,
    t: 32,
    b: 2,
    l: 2,
};

/// D=256, H=8, T=256, B=8, L=4: the benchmark's and the planner's size.
///
/// ```
/// assert_eq!(remat_reference::model::MEDIUM.d, 256);
/// ```
pub const MEDIUM: Config = Config {
    d: 256,
    h: 8,
    t: 256,
    b: 8,
    l: 4,
};

/// The medium width at 32 layers: how memory grows with depth.
///
/// ```
/// use remat_reference::model::{DEEP, MEDIUM};
/// assert_eq!((DEEP.d, DEEP.l), (MEDIUM.d, 32));
/// ```
pub const DEEP: Config = Config {
    d: 256,
    h: 8,
    t: 256,
    b: 8,
    l: 32,
};

/// Byte-level vocabulary: token ids are bytes.
///
/// ```
/// assert_eq!(remat_reference::model::VOCAB, 256);
/// ```
pub const VOCAB: i64 = 256;

/// What every block checkpoints (docs/reference-model.md, "Policies").
///
/// ```
/// use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
/// let model = Model::new(SMALL, 0);
/// let (tokens, targets) = batch(SMALL, 1);
/// let plain = model.loss_api(&tokens, &targets, ModelPolicy::None);
/// let full = model.loss_api(&tokens, &targets, ModelPolicy::Full);
/// assert!(plain.equal(&full)); // the same forward, bit for bit
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelPolicy {
    /// No checkpoints: plain autograd.
    None,
    /// Each block one checkpoint, replayed whole.
    Full,
    /// Each block a checkpoint whose attention is a `save` region (the MLP
    /// replays).
    Selective,
    /// Each block a checkpoint whose MLP is a `save` region (the attention
    /// replays).
    SaveMlp,
    /// As the active plan decides (docs/planner.md): each block is an
    /// `auto()` checkpoint with `Policy::Auto` regions `attention` and `mlp`;
    /// without a plan, every block checkpoints and both regions recompute.
    /// Not in `POLICIES` (the hand policies).
    Auto,
}

/// The hand policies, in the order tables and plots list them.
///
/// ```
/// use remat_reference::model::{ModelPolicy, POLICIES};
/// assert_eq!(POLICIES[0], ModelPolicy::None);
/// assert!(!POLICIES.contains(&ModelPolicy::Auto));
/// ```
pub const POLICIES: [ModelPolicy; 4] = [
    ModelPolicy::None,
    ModelPolicy::Full,
    ModelPolicy::Selective,
    ModelPolicy::SaveMlp,
];

/// One transformer block's parameters (`layers.{index}.…` in the store).
///
/// ```
/// use remat_reference::model::{Model, SMALL};
/// let model = Model::new(SMALL, 0);
/// let block = &model.blocks[1];
/// assert_eq!((block.index, block.qkv_w.size()), (1, vec![3 * SMALL.d, SMALL.d]));
/// ```
pub struct Block {
    /// The block's position in the stack; it names the checkpoint.
    pub index: usize,
    /// The model's sizes.
    pub cfg: Config,
    /// `ln1.weight`, `[d]`.
    pub ln1_w: Tensor,
    /// `ln1.bias`, `[d]`.
    pub ln1_b: Tensor,
    /// `attn.qkv.weight`, `[3d, d]`.
    pub qkv_w: Tensor,
    /// `attn.qkv.bias`, `[3d]`.
    pub qkv_b: Tensor,
    /// `attn.proj.weight`, `[d, d]`.
    pub proj_w: Tensor,
    /// `attn.proj.bias`, `[d]`.
    pub proj_b: Tensor,
    /// `ln2.weight`, `[d]`.
    pub ln2_w: Tensor,
    /// `ln2.bias`, `[d]`.
    pub ln2_b: Tensor,
    /// `mlp.fc1.weight`, `[4d, d]`.
    pub fc1_w: Tensor,
    /// `mlp.fc1.bias`, `[4d]`.
    pub fc1_b: Tensor,
    /// `mlp.fc2.weight`, `[d, 4d]`.
    pub fc2_w: Tensor,
    /// `mlp.fc2.bias`, `[d]`.
    pub fc2_b: Tensor,
}

/// The model's parameters: embeddings, blocks, final layer norm and head.
///
/// ```
/// use remat_reference::model::{Model, SMALL, VOCAB};
/// let model = Model::new(SMALL, 0);
/// assert_eq!(model.head_w.size(), [VOCAB, SMALL.d]);
/// assert_eq!(model.vs.variables().len(), model.named_parameters().len());
/// ```
pub struct Model {
    /// The sizes.
    pub cfg: Config,
    /// Holds every parameter under its reference name (for `tch::nn`
    /// optimizers and checkpoint files).
    pub vs: nn::VarStore,
    /// `tok_emb`, `[VOCAB, d]`.
    pub tok_emb: Tensor,
    /// `pos_emb`, `[t, d]`.
    pub pos_emb: Tensor,
    /// The blocks, in order.
    pub blocks: Vec<Block>,
    /// `ln_f.weight`, `[d]`.
    pub lnf_w: Tensor,
    /// `ln_f.bias`, `[d]`.
    pub lnf_b: Tensor,
    /// `head.weight`, `[VOCAB, d]`.
    pub head_w: Tensor,
    /// `head.bias`, `[VOCAB]`.
    pub head_b: Tensor,
}

/// How a parameter starts (docs/reference-model.md, "Parameters").
#[derive(Clone, Copy)]
enum Init {
    Normal,
    Zeros,
    Ones,
}

impl Init {
    fn tensor(self, shape: &[i64]) -> Tensor {
        let opts = (Kind::Float, Device::Cpu);
        match self {
            Init::Normal => Tensor::randn(shape, opts) * 0.02,
            Init::Zeros => Tensor::zeros(shape, opts),
            Init::Ones => Tensor::ones(shape, opts),
        }
    }
}

impl Model {
    /// A model with fresh parameters drawn after `tch::manual_seed(seed)`.
    ///
    /// ```
    /// use remat_reference::model::{Model, SMALL};
    /// let (a, b) = (Model::new(SMALL, 0), Model::new(SMALL, 0));
    /// assert!(a.tok_emb.equal(&b.tok_emb));
    /// ```
    pub fn new(cfg: Config, seed: i64) -> Model {
        Model::on(cfg, seed, Device::Cpu)
    }

    /// The model of [`Model::new`] with its parameters on `device`: drawn
    /// on the CPU from the same seed, then copied, so that every device
    /// starts from the same numbers.
    ///
    /// ```
    /// use remat_reference::model::{Model, SMALL};
    /// let device = tch::Device::cuda_if_available();
    /// let model = Model::on(SMALL, 0, device);
    /// assert_eq!(model.device(), device);
    /// assert!(model.tok_emb.to(tch::Device::Cpu).equal(&Model::new(SMALL, 0).tok_emb));
    /// ```
    pub fn on(cfg: Config, seed: i64, device: Device) -> Model {
        tch::manual_seed(seed);
        Model::build(cfg, device, Init::tensor)
    }

    /// Where the parameters are.
    ///
    /// ```
    /// use remat_reference::model::{Model, SMALL};
    /// assert_eq!(Model::new(SMALL, 0).device(), tch::Device::Cpu);
    /// ```
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// The parameters, created by `make` in a new `VarStore` under their
    /// reference names (`layers.0.ln1.weight`, ...), so that `tch::nn`
    /// optimizers and checkpoint files see them.
    fn build(cfg: Config, device: Device, mut make: impl FnMut(Init, &[i64]) -> Tensor) -> Model {
        // `var_copy` copies each CPU-drawn value into a variable on `device`.
        let vs = nn::VarStore::new(device);
        let d = cfg.d;
        let mut var = |path: &nn::Path, name: &str, init: Init, shape: &[i64]| {
            path.var_copy(name, &make(init, shape))
        };
        let root = vs.root();
        let blocks = (0..cfg.l as usize)
            .map(|index| {
                let p = &root / "layers" / index;
                let (ln1, attn, ln2, mlp) = (&p / "ln1", &p / "attn", &p / "ln2", &p / "mlp");
                Block {
                    index,
                    cfg,
                    ln1_w: var(&ln1, "weight", Init::Ones, &[d]),
                    ln1_b: var(&ln1, "bias", Init::Zeros, &[d]),
                    qkv_w: var(&(&attn / "qkv"), "weight", Init::Normal, &[3 * d, d]),
                    qkv_b: var(&(&attn / "qkv"), "bias", Init::Zeros, &[3 * d]),
                    proj_w: var(&(&attn / "proj"), "weight", Init::Normal, &[d, d]),
                    proj_b: var(&(&attn / "proj"), "bias", Init::Zeros, &[d]),
                    ln2_w: var(&ln2, "weight", Init::Ones, &[d]),
                    ln2_b: var(&ln2, "bias", Init::Zeros, &[d]),
                    fc1_w: var(&(&mlp / "fc1"), "weight", Init::Normal, &[4 * d, d]),
                    fc1_b: var(&(&mlp / "fc1"), "bias", Init::Zeros, &[4 * d]),
                    fc2_w: var(&(&mlp / "fc2"), "weight", Init::Normal, &[d, 4 * d]),
                    fc2_b: var(&(&mlp / "fc2"), "bias", Init::Zeros, &[d]),
                }
            })
            .collect();
        Model {
            cfg,
            tok_emb: var(&root, "tok_emb", Init::Normal, &[VOCAB, d]),
            pos_emb: var(&root, "pos_emb", Init::Normal, &[cfg.t, d]),
            blocks,
            lnf_w: var(&(&root / "ln_f"), "weight", Init::Ones, &[d]),
            lnf_b: var(&(&root / "ln_f"), "bias", Init::Zeros, &[d]),
            head_w: var(&(&root / "head"), "weight", Init::Normal, &[VOCAB, d]),
            head_b: var(&(&root / "head"), "bias", Init::Zeros, &[VOCAB]),
            vs,
        }
    }

    /// Every parameter with its reference name.
    ///
    /// ```
    /// use remat_reference::model::{Model, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    /// assert!(names.contains(&"layers.1.attn.qkv.weight".to_string()));
    /// ```
    pub fn named_parameters(&self) -> Vec<(String, &Tensor)> {
        let mut out = vec![
            ("tok_emb".to_string(), &self.tok_emb),
            ("pos_emb".to_string(), &self.pos_emb),
        ];
        for b in &self.blocks {
            let i = b.index;
            for (n, t) in [
                ("ln1.weight", &b.ln1_w),
                ("ln1.bias", &b.ln1_b),
                ("attn.qkv.weight", &b.qkv_w),
                ("attn.qkv.bias", &b.qkv_b),
                ("attn.proj.weight", &b.proj_w),
                ("attn.proj.bias", &b.proj_b),
                ("ln2.weight", &b.ln2_w),
                ("ln2.bias", &b.ln2_b),
                ("mlp.fc1.weight", &b.fc1_w),
                ("mlp.fc1.bias", &b.fc1_b),
                ("mlp.fc2.weight", &b.fc2_w),
                ("mlp.fc2.bias", &b.fc2_b),
            ] {
                out.push((format!("layers.{i}.{n}"), t));
            }
        }
        out.extend([
            ("ln_f.weight".to_string(), &self.lnf_w),
            ("ln_f.bias".to_string(), &self.lnf_b),
            ("head.weight".to_string(), &self.head_w),
            ("head.bias".to_string(), &self.head_b),
        ]);
        out
    }

    /// Zeroes every parameter's gradient (those that have one).
    ///
    /// ```
    /// use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let (tokens, targets) = batch(SMALL, 1);
    /// model.loss_api(&tokens, &targets, ModelPolicy::None).backward();
    /// model.zero_grad();
    /// assert_eq!(f64::try_from(model.head_w.grad().abs().sum(tch::Kind::Float)).unwrap(), 0.0);
    /// ```
    pub fn zero_grad(&self) {
        for (_, p) in self.named_parameters() {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }

    /// The mean next-byte cross-entropy under `policy`, with the blocks
    /// written with the runtime API (`block_forward`): what the runtime's
    /// own tests use. `Model::loss` is the same loss through the macro
    /// version of the blocks.
    ///
    /// ```
    /// use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let (tokens, targets) = batch(SMALL, 1);
    /// let api = model.loss_api(&tokens, &targets, ModelPolicy::Selective);
    /// assert!(api.equal(&model.loss(&tokens, &targets, ModelPolicy::Selective)));
    /// ```
    pub fn loss_api(&self, tokens: &Tensor, targets: &Tensor, policy: ModelPolicy) -> Tensor {
        self.loss_through(tokens, targets, |mut x| {
            for block in &self.blocks {
                x = block_forward(block, &x, policy);
            }
            x
        })
    }

    /// The loss with the stack of blocks given by `blocks` (embeddings, final
    /// layer norm, head and cross-entropy are the model's own).
    ///
    /// ```
    /// use remat_reference::model::{batch, Model, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let (tokens, targets) = batch(SMALL, 1);
    /// let no_blocks = model.loss_through(&tokens, &targets, |x| x);
    /// assert_eq!(no_blocks.size(), Vec::<i64>::new());
    /// ```
    pub fn loss_through(
        &self,
        tokens: &Tensor,
        targets: &Tensor,
        blocks: impl FnOnce(Tensor) -> Tensor,
    ) -> Tensor {
        let Config { t, b, .. } = self.cfg;
        let tok = Tensor::embedding(&self.tok_emb, tokens, -1, false, false);
        let pos = Tensor::embedding(
            &self.pos_emb,
            &Tensor::arange(t, (Kind::Int64, tokens.device())),
            -1,
            false,
            false,
        );
        let x = blocks(tok + pos);
        let x = x.layer_norm(
            [self.cfg.d],
            Some(&self.lnf_w),
            Some(&self.lnf_b),
            1e-5,
            false,
        );
        let logits = x.linear(&self.head_w, Some(&self.head_b));
        logits.view([b * t, VOCAB]).cross_entropy_loss::<Tensor>(
            &targets.view([b * t]),
            None,
            tch::Reduction::Mean,
            -100,
            0.0,
        )
    }
}

/// The attention of block `p` on `h` (`[b, t, d]`, already normalised).
///
/// ```
/// use remat_reference::model::{attention, Model, SMALL};
/// let model = Model::new(SMALL, 0);
/// let h = tch::Tensor::zeros([SMALL.b, SMALL.t, SMALL.d], tch::kind::FLOAT_CPU);
/// assert_eq!(attention(&model.blocks[0], &h).size(), [SMALL.b, SMALL.t, SMALL.d]);
/// ```
pub fn attention(p: &Block, h: &Tensor) -> Tensor {
    attention_op(h, [&p.qkv_w, &p.qkv_b, &p.proj_w, &p.proj_b], p.cfg)
}

/// The attention of docs/reference-model.md, from its weights
/// `[qkv.weight, qkv.bias, proj.weight, proj.bias]` (shared with the macro
/// version of the model, so that both run the same ops).
///
/// ```
/// use remat_reference::model::{attention, attention_op, Model, SMALL};
/// let model = Model::new(SMALL, 0);
/// let p = &model.blocks[0];
/// let h = tch::Tensor::ones([SMALL.b, SMALL.t, SMALL.d], tch::kind::FLOAT_CPU);
/// let op = attention_op(&h, [&p.qkv_w, &p.qkv_b, &p.proj_w, &p.proj_b], SMALL);
/// assert!(op.equal(&attention(p, &h)));
/// ```
pub fn attention_op(
    h: &Tensor,
    [qkv_w, qkv_b, proj_w, proj_b]: [&Tensor; 4],
    cfg: Config,
) -> Tensor {
    let Config {
        d, h: heads, t, b, ..
    } = cfg;
    let qkv = h
        .linear(qkv_w, Some(qkv_b))
        .view([b, t, 3, heads, d / heads])
        .permute([2, 0, 3, 1, 4]);
    let qkv = qkv.unbind(0);
    let (q, k, v) = (&qkv[0], &qkv[1], &qkv[2]);
    let scores = q.matmul(&k.transpose(-2, -1)) * (1.0 / ((d / heads) as f64).sqrt());
    let mask = Tensor::ones([t, t], (Kind::Bool, h.device())).triu(1);
    let scores = scores.masked_fill(&mask, f64::NEG_INFINITY);
    let probs = scores.softmax(-1, Kind::Float);
    let ctx = probs.matmul(v).transpose(1, 2).reshape([b, t, d]);
    ctx.linear(proj_w, Some(proj_b))
}

/// The MLP of block `p` on `h` (`[.., d]`, already normalised).
///
/// ```
/// use remat_reference::model::{mlp, Model, SMALL};
/// let model = Model::new(SMALL, 0);
/// let h = tch::Tensor::ones([3, SMALL.d], tch::kind::FLOAT_CPU);
/// assert_eq!(mlp(&model.blocks[0], &h).size(), [3, SMALL.d]);
/// ```
pub fn mlp(p: &Block, h: &Tensor) -> Tensor {
    mlp_op(h, [&p.fc1_w, &p.fc1_b, &p.fc2_w, &p.fc2_b])
}

/// The MLP of docs/reference-model.md from `[fc1.weight, fc1.bias, fc2.weight, fc2.bias]`.
///
/// ```
/// use remat_reference::model::{mlp, mlp_op, Model, SMALL};
/// let model = Model::new(SMALL, 0);
/// let p = &model.blocks[0];
/// let h = tch::Tensor::ones([3, SMALL.d], tch::kind::FLOAT_CPU);
/// assert!(mlp_op(&h, [&p.fc1_w, &p.fc1_b, &p.fc2_w, &p.fc2_b]).equal(&mlp(p, &h)));
/// ```
pub fn mlp_op(h: &Tensor, [fc1_w, fc1_b, fc2_w, fc2_b]: [&Tensor; 4]) -> Tensor {
    h.linear(fc1_w, Some(fc1_b))
        .gelu("none")
        .linear(fc2_w, Some(fc2_b))
}

/// Layer norm over the last dimension `d` with weight `w` and bias `b`.
///
/// ```
/// use remat_reference::model::ln;
/// let (w, b) = (tch::Tensor::ones([4], tch::kind::FLOAT_CPU), tch::Tensor::zeros([4], tch::kind::FLOAT_CPU));
/// let y = ln(&tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]), &w, &b, 4);
/// assert!(f64::try_from(y.mean(tch::Kind::Float)).unwrap().abs() < 1e-6);
/// ```
pub fn ln(x: &Tensor, w: &Tensor, b: &Tensor, d: i64) -> Tensor {
    x.layer_norm([d], Some(w), Some(b), 1e-5, false)
}

/// The block body under a policy (`None` and `Full` have no regions):
/// what `block_forward` checkpoints, and the body the runtime's tests wrap
/// in checkpoints of their own.
///
/// ```
/// use remat_reference::model::{block_body, Model, ModelPolicy, SMALL};
/// let model = Model::new(SMALL, 0);
/// let x = tch::Tensor::zeros([SMALL.b, SMALL.t, SMALL.d], tch::kind::FLOAT_CPU);
/// // Outside a checkpoint, regions are plain calls: every policy is the same.
/// let plain = block_body(&model.blocks[0], &x, ModelPolicy::None);
/// assert!(plain.equal(&block_body(&model.blocks[0], &x, ModelPolicy::Selective)));
/// ```
pub fn block_body(p: &Block, x: &Tensor, policy: ModelPolicy) -> Tensor {
    let d = p.cfg.d;
    let h = ln(x, &p.ln1_w, &p.ln1_b, d);
    let attn = match policy {
        ModelPolicy::Selective => {
            let a = region("attention", Policy::Save).call(&h, |h| attention(p, h));
            recompute_needs_tensor(&a);
            a
        }
        ModelPolicy::SaveMlp => {
            region("attention", Policy::Recompute).call(&h, |h| attention(p, h))
        }
        ModelPolicy::Auto => {
            let a = region("attention", Policy::Auto).call(&h, |h| attention(p, h));
            // The residual add reads it on replay if the plan saves it.
            recompute_needs_tensor(&a);
            a
        }
        _ => attention(p, &h),
    };
    let x = x + attn;
    let h = ln(&x, &p.ln2_w, &p.ln2_b, d);
    let m = match policy {
        ModelPolicy::Selective => region("mlp", Policy::Recompute).call(&h, |h| mlp(p, h)),
        ModelPolicy::SaveMlp => {
            let m = region("mlp", Policy::Save).call(&h, |h| mlp(p, h));
            recompute_needs_tensor(&m);
            m
        }
        ModelPolicy::Auto => {
            let m = region("mlp", Policy::Auto).call(&h, |h| mlp(p, h));
            recompute_needs_tensor(&m);
            m
        }
        _ => mlp(p, &h),
    };
    x + m
}

impl Model {
    /// An independent model with the same parameter values.
    ///
    /// ```
    /// use remat_reference::model::{Model, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let copy = model.deep_copy();
    /// assert!(copy.head_w.equal(&model.head_w));
    /// assert_ne!(copy.head_w.data_ptr(), model.head_w.data_ptr());
    /// ```
    pub fn deep_copy(&self) -> Model {
        let mut copy = Model::build(self.cfg, self.device(), |_, shape| {
            Init::Zeros.tensor(shape)
        });
        copy.vs
            .copy(&self.vs)
            .expect("the same variables under the same names");
        copy
    }
}

impl Block {
    /// Handles to the same parameters, for a checkpoint closure to own.
    ///
    /// ```
    /// use remat_reference::model::{Model, SMALL};
    /// let model = Model::new(SMALL, 0);
    /// let owned = model.blocks[0].shallow();
    /// assert_eq!(owned.qkv_w.data_ptr(), model.blocks[0].qkv_w.data_ptr());
    /// ```
    pub fn shallow(&self) -> Block {
        Block {
            index: self.index,
            cfg: self.cfg,
            ln1_w: self.ln1_w.shallow_clone(),
            ln1_b: self.ln1_b.shallow_clone(),
            qkv_w: self.qkv_w.shallow_clone(),
            qkv_b: self.qkv_b.shallow_clone(),
            proj_w: self.proj_w.shallow_clone(),
            proj_b: self.proj_b.shallow_clone(),
            ln2_w: self.ln2_w.shallow_clone(),
            ln2_b: self.ln2_b.shallow_clone(),
            fc1_w: self.fc1_w.shallow_clone(),
            fc1_b: self.fc1_b.shallow_clone(),
            fc2_w: self.fc2_w.shallow_clone(),
            fc2_b: self.fc2_b.shallow_clone(),
        }
    }
}

/// Block `p` on `x` under `policy`: a checkpoint named `layers.{index}`
/// around [`block_body`] (an `auto()` one for `Auto`), or the plain body for
/// `None`.
///
/// ```
/// use remat_reference::model::{block_forward, Model, ModelPolicy, SMALL};
/// let model = Model::new(SMALL, 0);
/// let x = tch::Tensor::zeros([SMALL.b, SMALL.t, SMALL.d], tch::kind::FLOAT_CPU)
///     .set_requires_grad(true);
/// let y = block_forward(&model.blocks[0], &x, ModelPolicy::SaveMlp);
/// y.sum(tch::Kind::Float).backward(); // the block replays here
/// assert_eq!(x.grad().size(), x.size());
/// ```
pub fn block_forward(p: &Block, x: &Tensor, policy: ModelPolicy) -> Tensor {
    if policy == ModelPolicy::None {
        return block_body(p, x, policy);
    }
    let p2 = p.shallow();
    let ckpt = checkpoint(format!("layers.{}", p.index));
    let ckpt = if policy == ModelPolicy::Auto {
        ckpt.auto()
    } else {
        ckpt
    };
    ckpt.call(x, move |x| block_body(&p2, &x, policy))
}

/// [`batch`] on `device`: the same bytes wherever the model runs.
///
/// ```
/// use remat_reference::model::{batch, batch_on, SMALL};
/// let (tokens, _) = batch_on(SMALL, 1, tch::Device::cuda_if_available());
/// assert!(tokens.to(tch::Device::Cpu).equal(&batch(SMALL, 1).0));
/// ```
pub fn batch_on(cfg: Config, seed: i64, device: Device) -> (Tensor, Tensor) {
    let (tokens, targets) = batch(cfg, seed);
    (tokens.to(device), targets.to(device))
}

/// Deterministic tokens and next-byte targets, from a generator of their
/// own (xorshift64 seeded with `seed`), not libtorch's global one: tests
/// that draw random numbers on other threads cannot change them. The
/// benchmark's Python side (bench/python/peers.py) draws the same bytes.
///
/// ```
/// use remat_reference::model::{batch, SMALL};
/// let (tokens, targets) = batch(SMALL, 1);
/// assert_eq!(tokens.size(), [SMALL.b, SMALL.t]);
/// // The targets are the tokens shifted by one.
/// assert!(tokens.narrow(1, 1, SMALL.t - 1).equal(&targets.narrow(1, 0, SMALL.t - 1)));
/// ```
pub fn batch(cfg: Config, seed: i64) -> (Tensor, Tensor) {
    let mut state = (seed as u64) ^ 0x9E37_79B9_7F4A_7C15;
    let tokens: Vec<i64> = (0..cfg.b * (cfg.t + 1))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % VOCAB as u64) as i64
        })
        .collect();
    let data = Tensor::from_slice(&tokens).view([cfg.b, cfg.t + 1]);
    (
        data.narrow(1, 0, cfg.t).contiguous(),
        data.narrow(1, 1, cfg.t).contiguous(),
    )
}
