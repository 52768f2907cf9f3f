// Adversarial round three (ui-tests/README.md): save outputs inside a container that is no region
// argument (a map, an `Rc`): a region opens save outputs given directly,
// by reference, or in an `Option`, slice, array or `Vec` only (docs/dsl.md,
// Y3), and refuses the rest with the `RegionArg` message. Fix: pass the
// element (ui-tests/pass/fixes_more.rs, `region_args`).
use remat::{checkpoint, remat, Saved};
use std::collections::HashMap;
use std::rc::Rc;
use tch::Tensor;

fn pair(x: &Tensor) -> (Tensor, Tensor) {
    (x.tanh(), x.sin())
}

fn mix(by_name: &HashMap<&str, Tensor>) -> Tensor {
    &by_name["a"] * &by_name["b"]
}

fn scaled(a: &Tensor) -> Tensor {
    a * 2
}

#[checkpoint]
fn a_map(x: &Tensor) -> Tensor {
    remat! { let (a, b) = save pair: pair(x); }
    let by_name: HashMap<&str, Saved<Tensor>> = [("a", a), ("b", b)].into();
    remat!(recompute mix: mix(&by_name))
}

#[checkpoint]
fn an_rc(x: &Tensor) -> Tensor {
    remat! { let (a, _b) = save pair: pair(x); }
    let shared = Rc::new(a);
    remat!(recompute scale: scaled(&shared))
}

fn main() {}
