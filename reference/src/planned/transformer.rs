//! A LLaMA-style transformer for the planner: RMS norms, rotary positions
//! left out, causal attention and a SwiGLU MLP, each block an `auto()`
//! checkpoint `layers.{i}` with `Policy::Auto` regions `attention` and
//! `mlp`. Other ops and shapes than the reference model's (no biases, a
//! gated MLP, attention through `scaled_dot_product_attention`).

use super::{norm_weight, parameter, Planned};
use remat::{checkpoint, recompute_needs_tensor, region, Policy};
use tch::{Kind, Tensor};

/// Sizes of a [`Llama`].
#[derive(Clone, Copy, Debug)]
pub struct LlamaConfig {
    /// Width.
    pub d: i64,
    /// Attention heads.
    pub heads: i64,
    /// The gated MLP's hidden width.
    pub hidden: i64,
    /// Sequence length.
    pub t: i64,
    /// Batch size.
    pub b: i64,
    /// Blocks.
    pub layers: i64,
}

/// 4 blocks of width 128, 4 heads, SwiGLU hidden 344, 4 sequences of 128.
pub const LLAMA: LlamaConfig = LlamaConfig {
    d: 128,
    heads: 4,
    hidden: 344,
    t: 128,
    b: 4,
    layers: 4,
};

const VOCAB: i64 = 256;

struct Block {
    attn_norm: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    mlp_norm: Tensor,
    w1: Tensor,
    w2: Tensor,
    w3: Tensor,
}

impl Block {
    fn new(cfg: LlamaConfig, seed: f64) -> Block {
        let (d, h) = (cfg.d, cfg.hidden);
        let s = 1.0 / (d as f64).sqrt();
        Block {
            attn_norm: norm_weight(d, seed),
            wq: parameter(&[d, d], seed + 1.0, s),
            wk: parameter(&[d, d], seed + 2.0, s),
            wv: parameter(&[d, d], seed + 3.0, s),
            wo: parameter(&[d, d], seed + 4.0, s),
            mlp_norm: norm_weight(d, seed + 5.0),
            w1: parameter(&[h, d], seed + 6.0, s),
            w2: parameter(&[d, h], seed + 7.0, 1.0 / (h as f64).sqrt()),
            w3: parameter(&[h, d], seed + 8.0, s),
        }
    }

    fn shallow(&self) -> Block {
        Block {
            attn_norm: self.attn_norm.shallow_clone(),
            wq: self.wq.shallow_clone(),
            wk: self.wk.shallow_clone(),
            wv: self.wv.shallow_clone(),
            wo: self.wo.shallow_clone(),
            mlp_norm: self.mlp_norm.shallow_clone(),
            w1: self.w1.shallow_clone(),
            w2: self.w2.shallow_clone(),
            w3: self.w3.shallow_clone(),
        }
    }

    fn parameters(&self) -> Vec<Tensor> {
        [
            &self.attn_norm,
            &self.wq,
            &self.wk,
            &self.wv,
            &self.wo,
            &self.mlp_norm,
            &self.w1,
            &self.w2,
            &self.w3,
        ]
        .into_iter()
        .map(Tensor::shallow_clone)
        .collect()
    }
}

/// RMS norm over the last dimension with weight `w`.
fn rms(x: &Tensor, w: &Tensor) -> Tensor {
    let scale = (x.square().mean_dim(-1, true, Kind::Float) + 1e-6).rsqrt();
    x * scale * w
}

fn attention(p: &Block, h: &Tensor, cfg: LlamaConfig) -> Tensor {
    let (b, t, d, n) = (cfg.b, cfg.t, cfg.d, cfg.heads);
    let split = |w: &Tensor| {
        h.linear::<Tensor>(w, None)
            .view([b, t, n, d / n])
            .transpose(1, 2)
    };
    let (q, k, v) = (split(&p.wq), split(&p.wk), split(&p.wv));
    let ctx =
        Tensor::scaled_dot_product_attention::<Tensor>(&q, &k, &v, None, 0.0, true, None, false);
    ctx.transpose(1, 2)
        .reshape([b, t, d])
        .linear::<Tensor>(&p.wo, None)
}

fn mlp(p: &Block, h: &Tensor) -> Tensor {
    let gate = h.linear::<Tensor>(&p.w1, None).silu();
    (gate * h.linear::<Tensor>(&p.w3, None)).linear::<Tensor>(&p.w2, None)
}

fn block(p: &Block, x: &Tensor, cfg: LlamaConfig) -> Tensor {
    let a = region("attention", Policy::Auto).call(&rms(x, &p.attn_norm), |h| attention(p, h, cfg));
    recompute_needs_tensor(&a);
    let x = x + a;
    let m = region("mlp", Policy::Auto).call(&rms(&x, &p.mlp_norm), |h| mlp(p, h));
    recompute_needs_tensor(&m);
    x + m
}

/// The model with its batch (byte tokens and next-byte targets).
pub struct Llama {
    cfg: LlamaConfig,
    embed: Tensor,
    blocks: Vec<Block>,
    norm: Tensor,
    head: Tensor,
    tokens: Tensor,
    targets: Tensor,
}

impl Llama {
    /// The model of `cfg`.
    ///
    /// ```
    /// use remat_reference::planned::{transformer::{Llama, LLAMA}, Planned};
    /// let m = Llama::new(LLAMA);
    /// m.loss().backward();
    /// ```
    pub fn new(cfg: LlamaConfig) -> Llama {
        let tokens = ((Tensor::arange(cfg.b * (cfg.t + 1), (Kind::Int64, tch::Device::Cpu))
            * 7919)
            .remainder(VOCAB))
        .view([cfg.b, cfg.t + 1]);
        Llama {
            cfg,
            embed: parameter(&[VOCAB, cfg.d], 11.0, 1.0),
            blocks: (0..cfg.layers)
                .map(|i| Block::new(cfg, 20.0 * i as f64))
                .collect(),
            norm: norm_weight(cfg.d, 13.0),
            head: parameter(&[VOCAB, cfg.d], 17.0, 1.0 / (cfg.d as f64).sqrt()),
            targets: tokens.narrow(1, 1, cfg.t),
            tokens: tokens.narrow(1, 0, cfg.t),
        }
    }
}

impl Planned for Llama {
    fn name(&self) -> String {
        "llama".into()
    }

    fn loss(&self) -> Tensor {
        let cfg = self.cfg;
        let mut x = Tensor::embedding(&self.embed, &self.tokens, -1, false, false);
        for (i, p) in self.blocks.iter().enumerate() {
            let p = p.shallow();
            x = checkpoint(format!("layers.{i}"))
                .auto()
                .call(&x, move |x| block(&p, &x, cfg));
        }
        let logits = rms(&x, &self.norm).linear::<Tensor>(&self.head, None);
        logits
            .view([-1, VOCAB])
            .cross_entropy_for_logits(&self.targets.reshape([-1]))
    }

    fn parameters(&self) -> Vec<Tensor> {
        let mut out = vec![
            self.embed.shallow_clone(),
            self.norm.shallow_clone(),
            self.head.shallow_clone(),
        ];
        out.extend(self.blocks.iter().flat_map(Block::parameters));
        out
    }
}
