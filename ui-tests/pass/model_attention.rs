// Causal self-attention with a fused QKV projection, as model code writes
// it: the projection is a `save` region, and its output is split
// into q, k and v (`chunk`) and into heads (`view`, `transpose`), views that
// are `Saved<Tensor>`s too (docs/dsl.md, Y5). `forward` passes the heads to
// regions, which open them (Y3): no mark. `forward_bare` reads them in bare
// code, after `needs q, k, v;`. Both give, under strict recomputation,
// bitwise the gradients without the checkpoint (`enabled = false`).
use remat::{checkpoint, remat, Capture, Saved};
use tch::{Device, Kind, Tensor};

#[derive(Capture)]
struct Attention {
    qkv: Tensor,
    proj: Tensor,
    heads: i64,
}

fn linear(x: &Tensor, w: &Tensor) -> Tensor {
    x.matmul(w)
}

fn causal_scores(q: &Tensor, k: &Tensor) -> Tensor {
    let (t, hd) = (q.size()[2], q.size()[3]);
    let att = q.matmul(&k.transpose(-2, -1)) * (1.0 / (hd as f64).sqrt());
    let future = Tensor::ones([t, t], (Kind::Bool, q.device())).triu(1);
    att.masked_fill(&future, f64::NEG_INFINITY)
        .softmax(-1, Kind::Float)
}

fn attend(att: &Tensor, v: &Tensor) -> Tensor {
    att.matmul(v)
}

impl Attention {
    /// `[b, t, c]` into q, k and v, each `[b, heads, t, c / heads]`: views
    /// of the save output, unread.
    fn split_heads(&self, qkv: &Saved<Tensor>) -> [Saved<Tensor>; 3] {
        let (b, t, c3) = qkv.size3().unwrap();
        let hd = c3 / 3 / self.heads;
        let heads: Vec<Saved<Tensor>> = qkv
            .chunk(3, 2)
            .iter()
            .map(|p| p.view([b, t, self.heads, hd]).transpose(1, 2))
            .collect();
        heads.try_into().ok().unwrap()
    }

    #[checkpoint(enabled = on, strict = true)]
    fn forward(&self, x: &Tensor, on: bool) -> Tensor {
        let (b, t, c) = x.size3().unwrap();
        remat! { let qkv = save qkv: linear(x, &self.qkv); }
        let [q, k, v] = self.split_heads(&qkv);
        remat! {
            let att = recompute scores: causal_scores(&q, &k);
            let y = save attend: attend(&att, &v);
            needs y; // merging the heads copies
        }
        let y = y.transpose(1, 2).contiguous().view([b, t, c]);
        remat!(recompute proj: linear(&y, &self.proj))
    }

    #[checkpoint(enabled = on, strict = true)]
    fn forward_bare(&self, x: &Tensor, on: bool) -> Tensor {
        let (b, t, c) = x.size3().unwrap();
        remat! { let qkv = save qkv: linear(x, &self.qkv); }
        let [q, k, v] = self.split_heads(&qkv);
        remat! { needs q, k, v; }
        let y = causal_scores(&q, &k).matmul(&v);
        y.transpose(1, 2)
            .contiguous()
            .view([b, t, c])
            .matmul(&self.proj)
    }
}

/// The gradients of the input and of both weights.
fn grads(forward: impl Fn(&Attention, &Tensor, bool) -> Tensor, on: bool) -> Vec<Tensor> {
    tch::manual_seed(0);
    let opts = (Kind::Float, Device::Cpu);
    let (b, t, c, heads) = (2, 5, 8, 2);
    let model = Attention {
        qkv: (Tensor::randn([c, 3 * c], opts) * 0.3).set_requires_grad(true),
        proj: (Tensor::randn([c, c], opts) * 0.3).set_requires_grad(true),
        heads,
    };
    let x = Tensor::randn([b, t, c], opts).set_requires_grad(true);
    forward(&model, &x, on)
        .sum(Kind::Float)
        .f_backward()
        .unwrap();
    vec![x.grad(), model.qkv.grad(), model.proj.grad()]
}

fn main() {
    for (name, forward) in [
        (
            "forward",
            Attention::forward as fn(&Attention, &Tensor, bool) -> Tensor,
        ),
        ("forward_bare", Attention::forward_bare),
    ] {
        let (on, off) = (grads(forward, true), grads(forward, false));
        for (g, expected) in on.iter().zip(&off) {
            assert!(
                g.equal(expected),
                "{name}: the gradients must be bitwise those without the checkpoint"
            );
        }
    }
}
