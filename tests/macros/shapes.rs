//! Issue 19's valid programs, compiled and run: shapes of model code the
//! compile-time check once refused (or could not express) give, under a
//! real checkpoint with strict recomputation, bitwise the gradients of the
//! same body run without one (`enabled = false`). Each body reads its input
//! once (`x * w`), so the weight's gradient has one path and the same
//! summation order with and without the checkpoint.

use crate::common::assert_bitwise;
use remat::{checkpoint, is_recomputing, remat};
use tch::{Device, Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h.tanh() * 2.0
}

fn mlp(h: &Tensor) -> Tensor {
    h.sin() + h
}

fn heads(h: &Tensor) -> Vec<Tensor> {
    vec![h.sin(), h.cos() * 3.0, h.tanh()]
}

struct Pair {
    t: Tensor,
    u: Tensor,
}

struct Both(Tensor, Tensor);

/// `..first`: the struct's other fields come from `first` without reading
/// it (docs/dsl.md, rule X2); its `save` field only goes to a region.
#[checkpoint(enabled = on, strict = true)]
fn struct_update(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    let first = Pair {
        t: h.exp(),
        u: h.sin(),
    };
    remat! { let a = save attention: attention(&h); }
    let second = Pair { t: a, ..first };
    remat! { let m = recompute mlp: mlp(&second.t); }
    m * &second.u
}

/// A `loop`'s value is what its `break` carries; returning it is not a
/// read (docs/dsl.md, rules X3 and X12).
#[checkpoint(enabled = on, strict = true)]
fn loop_value(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    let mut k = 0;
    loop {
        k += 1;
        if k == 3 {
            remat! { let a = save attention: attention(&h); }
            break a;
        }
    }
}

/// A `Vec` output read in a `for`: `needs parts;` marks every element
/// (docs/dsl.md, rule X4; docs/semantics.md, rule K4).
#[checkpoint(enabled = on, strict = true)]
fn vec_in_for(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let parts = save heads: heads(&h);
        needs parts;
    }
    let mut acc = h.exp();
    for t in &parts {
        acc = &acc * t.tanh();
    }
    acc
}

/// A tuple struct literal holding `save` outputs, marked field by field
/// (docs/dsl.md, rule L8).
#[checkpoint(enabled = on, strict = true)]
fn tuple_struct(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save attention: attention(&h);
        let b = save mlp: mlp(&h);
    }
    let p = Both(a, b);
    remat! { needs p.0, p.1; }
    p.0.exp() * p.1.cos()
}

/// A `needs` on the forward only, where it asks the runtime (docs/dsl.md,
/// rule X4), inside a `remat!` nested in another.
#[checkpoint(enabled = on, strict = true)]
fn forward_only_needs(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save attention: attention(&h);
        if !is_recomputing() {
            remat! { needs a; }
        }
    }
    a.exp() + &h
}

/// Pieces of a split view share its storage, which the runtime keeps
/// whole: a mark of one piece serves the others (docs/dsl.md, rule X4).
#[checkpoint(enabled = on, strict = true)]
fn views_of_a_needed_view(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let parts = a.chunk(3, 0);
    remat! { needs parts[0]; }
    parts[1].exp() * parts[2].sin() + &parts[0]
}

type Body = fn(&Tensor, &Tensor, bool) -> Tensor;

const BODIES: [(&str, Body); 6] = [
    ("struct update", struct_update),
    ("loop value", loop_value),
    ("Vec output in a for", vec_in_for),
    ("tuple struct", tuple_struct),
    ("forward-only needs", forward_only_needs),
    ("views of a needed view", views_of_a_needed_view),
];

/// The weight's gradient, with the checkpoint `on` or off.
fn grad(body: Body, on: bool) -> Tensor {
    let x = Tensor::arange(12, (Kind::Float, Device::Cpu)).sin();
    let w = Tensor::full([12], 0.7, (Kind::Float, Device::Cpu)).set_requires_grad(true);
    body(&x, &w, on).sum(Kind::Float).backward();
    w.grad().copy()
}

#[test]
// docs/dsl.md, rules X2-X4, X12 and L8: issue 19's valid programs.
fn refused_shapes_now_compile_and_match_without_a_checkpoint() {
    for (what, body) in BODIES {
        let plain = grad(body, false);
        let checkpointed = grad(body, true);
        assert_bitwise(&checkpointed, &plain, what);
    }
}
