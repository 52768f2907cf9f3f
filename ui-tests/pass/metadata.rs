// Metadata reads of a `save` output need no mark: they are methods of
// `Saved<Tensor>`, and a placeholder has the real shape, strides, dtype and
// device (docs/dsl.md, Y5). The region's output is not saved by anything (a
// scaling saves nothing), and strict recomputation serves a placeholder for
// every output not asked for, so replay reads these from a placeholder.
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h * 0.5
}

#[checkpoint(strict = true)]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
    }
    let rows = attn.size()[0];
    let cols = attn.size2().unwrap().1;
    assert_eq!(attn.dim(), 2);
    assert_eq!(attn.kind(), Kind::Float);
    assert_eq!(attn.device(), tch::Device::Cpu);
    assert_eq!(attn.numel(), (rows * cols) as usize);
    assert!(attn.requires_grad() && attn.is_contiguous());
    assert_eq!(attn.stride(), vec![cols, 1]);
    assert!(format!("{attn:?}").starts_with("Saved { size: [2, 3], kind: Float"));
    // Views of it are `Saved<Tensor>`s with the view's metadata.
    assert_eq!(attn.transpose(0, 1).size(), [cols, rows]);
    assert_eq!(attn.view([-1]).size(), [rows * cols]);
    assert_eq!(attn.chunk(cols, 1).len() as i64, cols);
    assert_eq!(attn.select(0, 1).unsqueeze(0).size(), [1, cols]);
    x * (rows * cols) as f64
}

fn main() {
    let x = Tensor::randn([2, 3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    block(&x).sum(Kind::Float).f_backward().unwrap();
    assert!(x
        .grad()
        .equal(&Tensor::full([2, 3], 6.0, (Kind::Float, tch::Device::Cpu))));
}
