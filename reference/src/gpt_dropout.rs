//! A small GPT with dropout, written in tch's `nn` style (`seq_t`, closures)
//! with `remat::nn` and the macros; replay redraws the forward's dropout
//! masks through `RngStateHook`. Shared by `tests/models` and
//! `examples/gpt_dropout.rs`.

use remat::nn::{self, Module};
use remat::prelude::*;

/// How the transformer blocks run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// No checkpoints.
    Plain,
    /// Each block one checkpoint, replayed whole.
    Whole,
    /// Each block a checkpoint whose attention is a `save` region.
    SaveAttention,
}

/// The sizes.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub vocab: i64,
    pub context: i64,
    pub embd: i64,
    pub heads: i64,
    pub layers: i64,
    pub dropout: f64,
}

/// Causal self-attention with dropout on the weights and on the output.
#[derive(Capture)]
pub struct Attention {
    qkv: nn::Linear,
    proj: nn::Linear,
    heads: i64,
    dropout: f64,
}

impl Attention {
    fn new(vs: &nn::Path, cfg: Config) -> Self {
        let c = Default::default();
        Attention {
            qkv: nn::linear(vs / "c_attn", cfg.embd, 3 * cfg.embd, c),
            proj: nn::linear(vs / "c_proj", cfg.embd, cfg.embd, c),
            heads: cfg.heads,
            dropout: cfg.dropout,
        }
    }

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
        let mask = Tensor::ones([t, t], tch::kind::FLOAT_CPU)
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

/// A pre-norm transformer block; its MLP is a `seq_t` with a closure.
#[derive(Capture)]
pub struct Block {
    index: i64,
    ln1: nn::LayerNorm,
    attn: Attention,
    ln2: nn::LayerNorm,
    mlp: nn::SequentialT,
}

impl Block {
    fn new(vs: &nn::Path, index: i64, cfg: Config) -> Self {
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

    #[checkpoint(name = [format!("h.{}", self.index)], state_hooks = [RngStateHook::cpu()])]
    fn whole(&self, x: &Tensor) -> Tensor {
        let x = x + self.attn.forward(&x.apply(&self.ln1), true);
        &x + x.apply(&self.ln2).apply_t(&self.mlp, true)
    }

    #[checkpoint(name = [format!("h.{}", self.index)], state_hooks = [RngStateHook::cpu()])]
    fn save_attention(&self, x: &Tensor) -> Tensor {
        let h = self.ln1.forward(x);
        remat! {
            let a = save attn: self.attn.forward(&h, true);
            needs a;
        }
        let x = x + a;
        &x + x.apply(&self.ln2).apply_t(&self.mlp, true)
    }

    pub fn forward(&self, x: &Tensor, mode: Mode) -> Tensor {
        match mode {
            Mode::Plain => self.plain(x),
            Mode::Whole => self.whole(x),
            Mode::SaveAttention => self.save_attention(x),
        }
    }
}

/// Token and position embeddings, blocks, final norm, tied-free head.
pub struct Gpt {
    wte: nn::Embedding,
    wpe: nn::Embedding,
    blocks: Vec<Block>,
    ln_f: nn::LayerNorm,
    head: nn::Linear,
    dropout: f64,
}

impl Gpt {
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

    pub fn forward(&self, ids: &Tensor, mode: Mode) -> Tensor {
        let t = ids.size()[1];
        let pos = Tensor::arange(t, tch::kind::INT64_CPU);
        let mut x = (ids.apply(&self.wte) + pos.apply(&self.wpe)).dropout(self.dropout, true);
        for block in &self.blocks {
            x = block.forward(&x, mode);
        }
        x.apply(&self.ln_f).apply(&self.head)
    }
}

/// A small configuration.
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

/// Next-token loss on a fixed batch of `[2, 8]` token ids.
pub fn loss(model: &Gpt, cfg: Config, mode: Mode) -> Tensor {
    let ids = (Tensor::arange(2 * cfg.context + 1, tch::kind::INT64_CPU) * 5).remainder(cfg.vocab);
    let x = ids.narrow(0, 0, 2 * cfg.context).view([2, cfg.context]);
    let y = ids.narrow(0, 1, 2 * cfg.context).view([2, cfg.context]);
    let logits = model.forward(&x, mode);
    logits
        .view([-1, cfg.vocab])
        .cross_entropy_for_logits(&y.view([-1]))
}
