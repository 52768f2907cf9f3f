// The first attempts of a torch user reading a save output without `needs`
// (docs/dsl.md, "Every compile error, and its fix"): each error names the
// save output and what to do, in remat's words where remat can shape them.
use remat::{checkpoint, needs, remat, Saved, Tensor};
use std::collections::{HashMap, VecDeque};

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn residual(x: &Tensor, attn: &Tensor) -> Tensor {
    x + attn
}

fn pair(a: &(Tensor, Tensor)) -> Tensor {
    &a.0 + &a.1
}

// An operator with a reference: the error says to mark it.
#[checkpoint]
fn add_ref(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    x + &a
}

// A scalar on the left.
#[checkpoint]
fn scaled(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    x * (0.5 * a)
}

// Passed to a function of tensors: rustc's own mismatched types.
#[checkpoint]
fn to_a_function(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    residual(x, &a)
}

// `needs` of a queue of save outputs: mark them one by one.
fn marks_a_queue(queue: VecDeque<Saved<Tensor>>) -> Tensor {
    needs(queue).pop_front().unwrap()
}

// A map of save outputs is marked whole (this one compiles).
fn marks_a_map(map: HashMap<&'static str, Saved<Tensor>>) -> Tensor {
    needs(map).remove("a").unwrap()
}

// A save output inside a tuple argument of a region: not opened.
#[checkpoint]
fn tuple_argument(x: &Tensor) -> Tensor {
    remat! {
        let a = save first: attention(x);
        let b = save second: attention(x);
        let y = recompute both: pair(&(a, b));
    }
    y
}

// A generic value returned from a checkpoint's closure.
fn generic<O>(x: &Tensor, f: fn(&Tensor) -> O) -> Tensor
where
    O: 'static,
{
    checkpoint("c").call(x, move |x| f(&x))
}

fn main() {}
