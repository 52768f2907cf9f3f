// A `remat!` that only a macro's expansion produces, from a `macro_rules!`
// defined outside the checkpoint function: the check cannot see it, so
// `#[checkpoint]` refuses it (docs/dsl.md, rule X15). Marked
// `#[remat(unchecked)]`, the same statement compiles.
use remat::checkpoint; // the macros below name `remat!`, which resolves where they are invoked
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

macro_rules! attention_block {
    ($x:expr) => {
        remat! { let a = save attention: attention($x); }
    };
}

macro_rules! scaled {
    ($x:expr) => {
        remat!(recompute scale: attention($x)) * 2.0
    };
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    attention_block!(x);
    let y = scaled!(x);
    #[remat(unchecked)]
    let z = scaled!(x);
    let w = scaled!(&z);
    y + z + w
}

fn main() {}
