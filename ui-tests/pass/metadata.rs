// Metadata reads of a `save` output need no mark: a placeholder has the
// real shape, strides, dtype and device. The region's output is not saved by
// anything (a scaling saves nothing), so replay really serves a placeholder.
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h * 0.5
}

#[checkpoint]
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
    #[remat(unchecked)]
    let replayed_a_placeholder = !remat::is_recomputing() || remat::is_placeholder(&attn);
    assert!(replayed_a_placeholder, "replay serves a placeholder");
    x * (rows * cols) as f64
}

fn main() {
    let x = Tensor::randn([2, 3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    block(&x).sum(Kind::Float).f_backward().unwrap();
    assert!(x
        .grad()
        .equal(&Tensor::full([2, 3], 6.0, (Kind::Float, tch::Device::Cpu))));
}
