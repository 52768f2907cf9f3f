// Adversarial round three (ui-tests/README.md): save outputs that leave a function or a closure
// other than through the checkpoint's return. Only a checkpoint's return
// positions unwrap them (names, tuples of names, `remat!(..)`, through
// blocks, `if` and `match`: docs/dsl.md, Y4): a helper's, a closure's
// `return`, a labelled block's `break` and a view in the tail keep the
// `Saved<Tensor>`. Fix: bind the value to a name returned by the
// checkpoint, or `needs` it (ui-tests/pass/fixes_more.rs, `returned`).
use remat::{checkpoint, remat, Saved};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

/// Not a checkpoint: its `save` output stays wrapped for its caller.
fn helper(x: &Tensor) -> Saved<Tensor> {
    remat!(save attention: attention(x))
}

#[checkpoint]
fn from_a_helper(x: &Tensor) -> Tensor {
    let a = helper(x);
    a.exp()
}

#[checkpoint]
fn return_in_a_closure(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let take = move || -> Tensor {
        return a;
    };
    take().exp()
}

#[checkpoint]
fn break_out_of_a_labelled_block(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    'out: {
        break 'out a;
    }
}

#[checkpoint]
fn a_view_in_the_tail(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    a.transpose(0, 1)
}

fn main() {}
