// Reads the old, syntactic check missed (adversarial round one), each refused by the
// types: a named format argument, a field and an index of `Tensor` type
// given a save output, a variable given a save output in one branch and a
// tensor in the other, a save output carried into the next loop iteration,
// and an element of a two-tensor output whose sibling was marked.
use remat::{checkpoint, remat};
use tch::Tensor;

fn f(h: &Tensor) -> Tensor {
    h.tanh()
}

fn pair(h: &Tensor) -> (Tensor, Tensor) {
    (h.tanh(), h.sigmoid())
}

struct Holder {
    t: Tensor,
}

// A named format argument.
#[checkpoint]
fn named_format(x: &Tensor) -> Tensor {
    let a = remat!(save f: f(x));
    println!("{t}", t = a);
    x + 1
}

// Stored in a field and in an index, read later.
#[checkpoint]
fn field_and_index(x: &Tensor) -> Tensor {
    let a = remat!(save f: f(x));
    let mut h = Holder { t: x.shallow_clone() };
    h.t = a;
    let b = remat!(save g: f(x));
    let mut v = vec![x.shallow_clone()];
    v[0] = b;
    &h.t + &v[0]
}

// Assigned in one branch, read after the join.
#[checkpoint]
fn branch(x: &Tensor, c: bool) -> Tensor {
    let a;
    if c {
        a = remat!(save f: f(x));
    } else {
        a = x.exp();
    }
    a * 2
}

// Carried into the next iteration.
#[checkpoint]
fn carried(x: &Tensor, n: usize) -> Tensor {
    let mut h = x.shallow_clone();
    for i in 0..n {
        let y = &h * 2;
        h = remat!(save [format!("layer{i}")]: f(&y));
    }
    h
}

// One part of a two-tensor output marked, the other read.
#[checkpoint]
fn tuple_part(x: &Tensor) -> Tensor {
    remat! {
        let (a, b) = save pair: pair(x);
        needs a;
    }
    a * b
}

fn main() {}
