//! A small GPT with dropout, written in tch's `nn` style (`seq_t`, closures)
//! with `remat::nn` and the macros; recomputation redraws the forward's
//! dropout masks with no state hook written, since every checkpoint keeps
//! the random state by default (docs/semantics.md, rule C14). Used by
//! `tests/models` and `tests/rng` (bitwise against the plain model, under
//! every policy) and `examples/gpt_dropout.rs`.
//!
//! Dropout draws from libtorch's process-wide generator: a test that
//! compares runs holds [`remat::autograd::GeneratorLock`] while it seeds and trains
//! (docs/testing.md).
//!
//! ```
//! use remat_reference::gpt_dropout::{loss, small, Gpt, Mode};
//! let _rng = remat::autograd::GeneratorLock::seeded(11);
//! let vs = remat::nn::VarStore::new(tch::Device::Cpu);
//! let model = Gpt::new(&vs.root(), small());
//! loss(&model, small(), Mode::Whole).backward(); // replay redraws the masks
//! ```

use remat::nn::{self, Module, ModuleT};
use remat::prelude::*;

/// How the transformer blocks run.
///
/// ```
/// use remat_reference::gpt_dropout::{loss, small, Gpt, Mode};
/// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
/// let model = Gpt::new(&vs.root(), small());
/// for mode in Mode::ALL {
///     loss(&model, small(), mode).backward();
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// No checkpoints (the reference model's `none`).
    Plain,
    /// Each block one checkpoint, replayed whole (`full`).
    Whole,
    /// Each block a checkpoint whose attention is a `save` region and whose
    /// MLP a `recompute` region (`selective`).
    SaveAttention,
    /// Each block a checkpoint whose attention is a `recompute` region and
    /// whose MLP a `save` region (`save_mlp`).
    SaveMlp,
}

impl Mode {
    /// Every mode, the plain one first: the reference model's four policies.
    pub const ALL: [Mode; 4] = [Mode::Plain, Mode::Whole, Mode::SaveAttention, Mode::SaveMlp];
}

/// The sizes, and the dropout probability.
///
/// ```
/// use remat_reference::gpt_dropout::{small, Config};
/// let cfg = Config { layers: 4, ..small() };
/// assert_eq!(cfg.embd % cfg.heads, 0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Token ids are in `0..vocab`.
    pub vocab: i64,
    /// The longest sequence (rows of the position embedding).
    pub context: i64,
    /// The model width.
    pub embd: i64,
    /// Attention heads (`embd` divisible by it).
    pub heads: i64,
    /// Transformer blocks.
    pub layers: i64,
    /// The probability of every dropout (embeddings, attention, outputs).
    pub dropout: f64,
}

/// Causal self-attention with dropout on the weights and on the output.
/// `Capture`, so that a checkpoint or a `save` region owns a handle to the
/// same layers.
///
/// ```
/// use remat::Capture;
/// use remat_reference::gpt_dropout::{small, Attention};
/// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
/// let attn = Attention::new(&vs.root(), small());
/// let _owned = attn.capture(); // the same weights
/// ```
#[derive(Capture)]
pub struct Attention {
    qkv: nn::Linear,
    proj: nn::Linear,
    heads: i64,
    dropout: f64,
}

impl Attention {
    /// The layers `c_attn` (queries, keys and values) and `c_proj` under
    /// `vs`.
    ///
    /// ```
    /// use remat_reference::gpt_dropout::{small, Attention};
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let _attn = Attention::new(&vs.root(), small());
    /// assert!(vs.variables().contains_key("c_attn.weight"));
    /// ```
    pub fn new(vs: &nn::Path, cfg: Config) -> Self {
        let c = Default::default();
        Attention {
            qkv: nn::linear(vs / "c_attn", cfg.embd, 3 * cfg.embd, c),
            proj: nn::linear(vs / "c_proj", cfg.embd, cfg.embd, c),
            heads: cfg.heads,
            dropout: cfg.dropout,
        }
    }

    /// The attention of `x` (`[batch, time, embd]`); dropout only when
    /// `train`.
    ///
    /// ```
    /// use remat_reference::gpt_dropout::{small, Attention};
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let attn = Attention::new(&vs.root(), small());
    /// let x = tch::Tensor::randn([2, 8, small().embd], tch::kind::FLOAT_CPU);
    /// assert!(attn.forward(&x, false).equal(&attn.forward(&x, false)));
    /// ```
    pub fn forward(&self, x: &Tensor, train: bool) -> Tensor {
        let (b, t, c) = x.size3().unwrap();
        let hd = c / self.heads;
        let split = |t_: Tensor| t_.view([b, t, self.heads, hd]).transpose(1, 2);
        let qkv = x.apply(&self.qkv).split(c, 2);
        let (q, k, v) = (
            split(qkv[0].shallow_clone()),
            split(qkv[1].shallow_clone()),
            split(qkv[2].shallow_clone()),
        );
        let mask = Tensor::ones([t, t], (tch::Kind::Float, x.device()))
            .tril(0)
            .view([1, 1, t, t]);
        let att = (q.matmul(&k.transpose(-2, -1)) * (1.0 / (hd as f64).sqrt()))
            .masked_fill(&mask.eq(0.0), f64::NEG_INFINITY)
            .softmax(-1, tch::Kind::Float)
            .dropout(self.dropout, train);
        let y = att.matmul(&v).transpose(1, 2).contiguous().view([b, t, c]);
        y.apply(&self.proj).dropout(self.dropout, train)
    }
}

/// A pre-norm transformer block; its MLP is a `seq_t` with closures (tch's
/// style, which `remat::nn` makes capturable).
///
/// ```
/// use remat_reference::gpt_dropout::{small, Block, Mode};
/// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
/// let block = Block::new(&vs.root(), 0, small());
/// let x = tch::Tensor::randn([2, 8, small().embd], tch::kind::FLOAT_CPU);
/// assert_eq!(block.forward(&x, Mode::Whole).size(), [2, 8, small().embd]);
/// ```
#[derive(Capture)]
pub struct Block {
    index: i64,
    ln1: nn::LayerNorm,
    attn: Attention,
    ln2: nn::LayerNorm,
    mlp: nn::SequentialT,
}

impl Block {
    /// The block's layers under `vs` (`ln_1`, `attn`, `ln_2`, `mlp`);
    /// `index` names its checkpoint (`h.{index}`).
    ///
    /// ```
    /// use remat_reference::gpt_dropout::{small, Block};
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let _block = Block::new(&vs.root(), 0, small());
    /// assert!(vs.variables().contains_key("mlp.c_fc.weight"));
    /// ```
    pub fn new(vs: &nn::Path, index: i64, cfg: Config) -> Self {
        let p = cfg.dropout;
        Block {
            index,
            ln1: nn::layer_norm(vs / "ln_1", vec![cfg.embd], Default::default()),
            attn: Attention::new(&(vs / "attn"), cfg),
            ln2: nn::layer_norm(vs / "ln_2", vec![cfg.embd], Default::default()),
            mlp: nn::seq_t()
                .add(nn::linear(
                    vs / "mlp" / "c_fc",
                    cfg.embd,
                    4 * cfg.embd,
                    Default::default(),
                ))
                .add_fn(|xs| xs.gelu("none"))
                .add(nn::linear(
                    vs / "mlp" / "c_proj",
                    4 * cfg.embd,
                    cfg.embd,
                    Default::default(),
                ))
                .add_fn_t(move |xs, train| xs.dropout(p, train)),
        }
    }

    fn plain(&self, x: &Tensor) -> Tensor {
        let x = x + self.attn.forward(&x.apply(&self.ln1), true);
        &x + x.apply(&self.ln2).apply_t(&self.mlp, true)
    }

    /// The checkpointed modes: no state hook, the checkpoint keeps the
    /// random state (rule C14). Dropout draws in every region, in bare code
    /// and in the `save` region recomputation skips.
    #[checkpoint(name = [format!("h.{}", self.index)])]
    fn checkpointed(&self, x: &Tensor, attention: Policy, mlp: Policy) -> Tensor {
        let h = self.ln1.forward(x);
        remat! {
            let a = region [attention] attn: self.attn.forward(&h, true);
            needs a;
        }
        let x = x + a;
        let h = self.ln2.forward(&x);
        remat! {
            let m = region [mlp] mlp: self.mlp.forward_t(&h, true);
            needs m;
        }
        &x + m
    }

    /// The block on `x` (`[batch, time, embd]`, dropout on) under `mode`.
    /// The checkpointed modes draw the forward's masks again when they
    /// recompute, with every default.
    ///
    /// ```
    /// use remat_reference::gpt_dropout::{small, Block, Mode};
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let block = Block::new(&vs.root(), 0, small());
    /// let x = tch::Tensor::randn([2, 8, small().embd], tch::kind::FLOAT_CPU);
    /// block.forward(&x, Mode::SaveAttention).sum(tch::Kind::Float).backward();
    /// ```
    pub fn forward(&self, x: &Tensor, mode: Mode) -> Tensor {
        use Policy::{Recompute, Save};
        match mode {
            Mode::Plain => self.plain(x),
            Mode::Whole => self.checkpointed(x, Recompute, Recompute),
            Mode::SaveAttention => self.checkpointed(x, Save, Recompute),
            Mode::SaveMlp => self.checkpointed(x, Recompute, Save),
        }
    }
}

/// Token and position embeddings, blocks, final norm, untied head.
///
/// ```
/// use remat_reference::gpt_dropout::{small, Gpt, Mode};
/// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
/// let model = Gpt::new(&vs.root(), small());
/// let ids = tch::Tensor::zeros([2, 8], tch::kind::INT64_CPU);
/// assert_eq!(model.forward(&ids, Mode::Plain).size(), [2, 8, small().vocab]);
/// ```
pub struct Gpt {
    wte: nn::Embedding,
    wpe: nn::Embedding,
    blocks: Vec<Block>,
    ln_f: nn::LayerNorm,
    head: nn::Linear,
    dropout: f64,
}

impl Gpt {
    /// A model of `cfg`'s sizes, its variables under `vs` with GPT-2's names
    /// (`wte`, `wpe`, `h.{i}.…`, `ln_f`, `lm_head`).
    ///
    /// ```
    /// use remat_reference::gpt_dropout::{small, Gpt};
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let _model = Gpt::new(&vs.root(), small());
    /// assert!(vs.variables().contains_key("h.1.ln_2.weight"));
    /// ```
    pub fn new(vs: &nn::Path, cfg: Config) -> Self {
        let e = Default::default();
        Gpt {
            wte: nn::embedding(vs / "wte", cfg.vocab, cfg.embd, e),
            wpe: nn::embedding(vs / "wpe", cfg.context, cfg.embd, e),
            blocks: (0..cfg.layers)
                .map(|i| Block::new(&(vs / "h" / i), i, cfg))
                .collect(),
            ln_f: nn::layer_norm(vs / "ln_f", vec![cfg.embd], Default::default()),
            head: nn::linear(
                vs / "lm_head",
                cfg.embd,
                cfg.vocab,
                nn::LinearConfig {
                    bias: false,
                    ..Default::default()
                },
            ),
            dropout: cfg.dropout,
        }
    }

    /// The logits of token `ids` (`[batch, time]`), dropout on, the blocks
    /// under `mode`.
    ///
    /// ```
    /// use remat_reference::gpt_dropout::{small, Gpt, Mode};
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let model = Gpt::new(&vs.root(), small());
    /// let ids = tch::Tensor::zeros([1, 4], tch::kind::INT64_CPU);
    /// assert_eq!(model.forward(&ids, Mode::Whole).size(), [1, 4, small().vocab]);
    /// ```
    pub fn forward(&self, ids: &Tensor, mode: Mode) -> Tensor {
        let t = ids.size()[1];
        let pos = Tensor::arange(t, (tch::Kind::Int64, ids.device()));
        let mut x = (ids.apply(&self.wte) + pos.apply(&self.wpe)).dropout(self.dropout, true);
        for block in &self.blocks {
            x = block.forward(&x, mode);
        }
        x.apply(&self.ln_f).apply(&self.head)
    }
}

/// A small configuration: width 16, two heads, two blocks, dropout 0.1.
///
/// ```
/// let cfg = remat_reference::gpt_dropout::small();
/// assert_eq!((cfg.embd, cfg.layers), (16, 2));
/// ```
pub fn small() -> Config {
    Config {
        vocab: 32,
        context: 8,
        embd: 16,
        heads: 2,
        layers: 2,
        dropout: 0.1,
    }
}

/// Next-token loss on a fixed batch of `[2, context]` token ids (computed,
/// not drawn: the only draws are dropout's).
///
/// ```
/// use remat_reference::gpt_dropout::{loss, small, Gpt, Mode};
/// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
/// let model = Gpt::new(&vs.root(), small());
/// assert_eq!(loss(&model, small(), Mode::Plain).size(), Vec::<i64>::new());
/// ```
pub fn loss(model: &Gpt, cfg: Config, mode: Mode) -> Tensor {
    let device = model.head.ws.device();
    let ids =
        (Tensor::arange(2 * cfg.context + 1, (tch::Kind::Int64, device)) * 5).remainder(cfg.vocab);
    let x = ids.narrow(0, 0, 2 * cfg.context).view([2, cfg.context]);
    let y = ids.narrow(0, 1, 2 * cfg.context).view([2, cfg.context]);
    let logits = model.forward(&x, mode);
    logits
        .view([-1, cfg.vocab])
        .cross_entropy_for_logits(&y.view([-1]))
}
