// Adversarial round three (ui-tests/README.md): a macro in pattern position, whose names the old
// check could not see. rustc expands it: the names it binds are the
// elements of a save output, `Saved<Tensor>`s. Fix: `needs` them
// (ui-tests/pass/fixes.rs, `pattern_macro`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn pair(x: &Tensor) -> (Tensor, Tensor) {
    (x.tanh(), x.sin())
}

macro_rules! both {
    ($a:ident, $b:ident) => {
        ($a, $b)
    };
}

#[checkpoint]
fn in_a_let(x: &Tensor) -> Tensor {
    let both!(p, q) = remat!(save pair: pair(x));
    p * q
}

#[checkpoint]
fn in_a_region_statement(x: &Tensor) -> Tensor {
    remat! {
        let both!(p, q) = save pair: pair(x);
    }
    p.exp() + q
}

fn main() {}
