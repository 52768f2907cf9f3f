// Adversarial round three (ui-tests/README.md): closures stored and called later, and iterator
// adapters. A closure is type-checked where it is written, whenever it
// runs: what it captures keeps its type, `Saved<Tensor>`. Fix: `needs`
// before the closure, or inside it (ui-tests/pass/fixes_more.rs,
// `closures`).
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

fn heads(x: &Tensor) -> Vec<Tensor> {
    x.chunk(4, 0)
}

#[checkpoint]
fn stored_and_called_later(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let gate: Box<dyn Fn(&Tensor) -> Tensor> = Box::new(move |h| h * a.sigmoid());
    gate(x) + gate(&(x * 2))
}

#[checkpoint]
fn map_over_the_parts(x: &Tensor) -> Tensor {
    remat! { let parts = save heads: heads(x); }
    let norms: Vec<Tensor> = parts.iter().map(|p| p.norm()).collect();
    Tensor::stack(&norms, 0).sum(Kind::Float)
}

#[checkpoint]
fn zip_and_fold(x: &Tensor) -> Tensor {
    remat! { let parts = save heads: heads(x); }
    let scales = [1.0, 2.0, 3.0, 4.0];
    parts
        .into_iter()
        .zip(scales)
        .fold(x.sum(Kind::Float), |acc, (p, s)| {
            acc + p.sum(Kind::Float) * s
        })
}

fn main() {}
