// A residual stack whose layers loop inside one checkpoint, as model code
// writes it: frozen layers are skipped with a labelled
// `continue`; each layer's attention is a `save` region named after the
// layer, marked because the residual add reads it, and its MLP a
// `recompute` region in a `remat!` nested in the layer's `remat!` block
// (docs/dsl.md, G1). The hidden state carried to the next layer is a plain
// tensor. Under strict recomputation it gives bitwise the gradients
// without the checkpoint.
use remat::{checkpoint, remat, Capture};
use tch::{Device, Kind, Tensor};

#[derive(Capture)]
struct Layer {
    attention: Tensor,
    mlp: Tensor,
}

#[derive(Capture)]
struct Stack {
    layers: Vec<Layer>,
    frozen: Vec<usize>,
}

fn mix(h: &Tensor, w: &Tensor) -> Tensor {
    h.matmul(w).tanh()
}

fn mlp(h: &Tensor, w: &Tensor) -> Tensor {
    h.matmul(w).gelu("none")
}

impl Stack {
    #[checkpoint(enabled = on, strict = true)]
    fn forward(&self, x: &Tensor, on: bool) -> Tensor {
        let mut h = x.shallow_clone();
        'layers: for (i, layer) in self.layers.iter().enumerate() {
            for &frozen in &self.frozen {
                if frozen == i {
                    continue 'layers;
                }
            }
            remat! {
                let a = save [format!("attention.{i}")]: mix(&h, &layer.attention);
                needs a;
                let r = &h + &a;
                remat! {
                    let m = recompute [format!("mlp.{i}")]: mlp(&r, &layer.mlp);
                }
            }
            h = r + m;
        }
        h
    }
}

fn grads(on: bool) -> Vec<Tensor> {
    tch::manual_seed(0);
    let opts = (Kind::Float, Device::Cpu);
    let c = 6;
    let weight = || (Tensor::randn([c, c], opts) * 0.3).set_requires_grad(true);
    let stack = Stack {
        layers: (0..4)
            .map(|_| Layer {
                attention: weight(),
                mlp: weight(),
            })
            .collect(),
        frozen: vec![2],
    };
    let x = Tensor::randn([3, c], opts).set_requires_grad(true);
    stack.forward(&x, on).sum(Kind::Float).f_backward().unwrap();
    let mut grads = vec![x.grad()];
    for (i, layer) in stack.layers.iter().enumerate() {
        assert_eq!(layer.attention.grad().defined(), i != 2, "layer {i}");
        if i != 2 {
            grads.extend([layer.attention.grad(), layer.mlp.grad()]);
        }
    }
    grads
}

fn main() {
    let (on, off) = (grads(true), grads(false));
    for (g, expected) in on.iter().zip(&off) {
        assert!(
            g.equal(expected),
            "the gradients must be bitwise those without the checkpoint"
        );
    }
}
