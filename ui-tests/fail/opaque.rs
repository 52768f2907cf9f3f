// Adversarial round three (ui-tests/README.md): a save output passed to a region inside
// `remat::Opaque(..)`. The region's body receives an `Opaque` as it is
// (only direct arguments, references, `Option`s, slices and `Vec`s of save
// outputs are opened: docs/dsl.md, Y3), so the save output in it is still a
// `Saved<Tensor>`, whether alone or in a struct. Fix: pass it as an
// argument of its own (ui-tests/pass/fixes.rs, `opaque`).
use remat::{checkpoint, remat, Opaque};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

fn scaled(t: Opaque<&Tensor>, by: f64) -> Tensor {
    t.0 * by
}

struct Pair {
    left: Tensor,
    right: Tensor,
}

fn mix(p: Opaque<Pair>) -> Tensor {
    &p.0.left * &p.0.right
}

#[checkpoint]
fn alone(x: &Tensor) -> Tensor {
    remat! {
        let a = save attention: attention(x);
        let y = recompute scale: scaled(Opaque(&a), 2.0);
    }
    y + x
}

#[checkpoint]
fn in_a_struct(x: &Tensor) -> Tensor {
    remat! {
        let a = save attention: attention(x);
        let y = recompute mix: mix(Opaque(Pair { left: a, right: x * 2 }));
    }
    y + x
}

fn main() {}
