// A `let` under `#[cfg]` may be compiled out (adversarial round two). Each cfg'd `let`
// has its own type: where the `save` one is compiled in (debug builds, as
// here), `attn` is a `Saved<Tensor>` and has no `exp` (docs/dsl.md, Y1).
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        #[cfg(debug_assertions)]
        let attn = save attention: attention(x);
        #[cfg(not(debug_assertions))]
        let attn = recompute attention: attention(x);
    }
    attn.exp()
}

fn main() {}
