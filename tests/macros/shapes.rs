//! The valid programs of the second adversarial round, compiled and run: shapes of model code that
//! move save outputs (`Saved<Tensor>`) through structs, loops, collections,
//! nested `remat!` and views, with the marks the types require, give, under
//! a real checkpoint with strict recomputation, bitwise the gradients of
//! the same body run without one (`enabled = false`). Each body reads its
//! input once (`x * w`), so the weight's gradient has one path and the same
//! summation order with and without the checkpoint.

use crate::common::assert_bitwise;
use remat::{checkpoint, needs, remat, Saved};
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

/// A struct whose field holds a save output, unread by bare code.
struct Pair {
    t: Saved<Tensor>,
    u: Tensor,
}

struct Both(Saved<Tensor>, Saved<Tensor>);

/// `..first`: the struct's other fields come from `first` without reading
/// it; its `save` field only goes to a region, which opens it (docs/dsl.md,
/// rules Y1 and Y3): no mark.
#[checkpoint(enabled = on, strict = true)]
fn struct_update(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    let first = Pair {
        t: Saved::new(h.exp()),
        u: h.sin(),
    };
    remat! { let a = save attention: attention(&h); }
    let second = Pair { t: a, ..first };
    remat! { let m = recompute mlp: mlp(&second.t); }
    m * &second.u
}

/// A `loop`'s value is what its `break` carries, still a save output;
/// returning it is not a read: the checkpoint hands it to the caller
/// unwrapped (docs/dsl.md, rule Y4).
#[checkpoint(enabled = on, strict = true)]
fn loop_value(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    let mut k = 0;
    let a = loop {
        k += 1;
        if k == 3 {
            remat! { let a = save attention: attention(&h); }
            break a;
        }
    };
    a
}

/// A `Vec` output read in a `for`: `needs parts;` marks every element
/// (docs/dsl.md, rule Y2; docs/semantics.md, rule K4).
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
/// where they are read, with the expression form (docs/dsl.md, rule Y2).
#[checkpoint(enabled = on, strict = true)]
fn tuple_struct(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save attention: attention(&h);
        let b = save mlp: mlp(&h);
    }
    let p = Both(a, b);
    needs(&p.0).exp() * needs(&p.1).cos()
}

/// A `needs` inside a `remat!` nested in another: its rebinding holds for
/// the rest of the function (docs/dsl.md, rule Y2).
#[checkpoint(enabled = on, strict = true)]
fn nested_needs(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save attention: attention(&h);
        remat! { needs a; }
    }
    a.exp() + &h
}

/// Pieces of a split view of a save output are save outputs (docs/dsl.md,
/// rule Y5); they share its storage, which the runtime keeps whole once
/// any piece is marked. Each piece read is marked where it is read.
#[checkpoint(enabled = on, strict = true)]
fn views_of_a_needed_view(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let parts = a.chunk(3, 0);
    let first = needs(&parts[0]);
    needs(&parts[1]).exp() * needs(&parts[2]).sin() + first
}

type Body = fn(&Tensor, &Tensor, bool) -> Tensor;

const BODIES: [(&str, Body); 6] = [
    ("struct update", struct_update),
    ("loop value", loop_value),
    ("Vec output in a for", vec_in_for),
    ("tuple struct", tuple_struct),
    ("needs in a nested remat!", nested_needs),
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
// docs/dsl.md, rules Y1-Y5: the valid programs of the second adversarial round.
fn save_outputs_in_every_shape_match_without_a_checkpoint() {
    for (what, body) in BODIES {
        let plain = grad(body, false);
        let checkpointed = grad(body, true);
        assert_bitwise(&checkpointed, &plain, what);
    }
}

/// A UNet down block's shape, as `#[checkpoint]` writes it: the output and
/// the list of skip states (docs/semantics.md, rule C10).
#[remat::checkpoint]
fn down_block(x: &Tensor) -> (Tensor, Vec<Tensor>) {
    let a = x.sin();
    let b = (&a * 2.0).tanh();
    (b.shallow_clone(), vec![a, b])
}

#[test]
fn a_checkpoint_returning_a_tensor_and_a_vec_of_them_gives_the_plain_gradients() {
    let x = Tensor::from_slice(&[0.3f32, -1.2, 0.7, 2.0]).set_requires_grad(true);
    let (h, skips) = down_block(&x);
    ((&h * &skips[0]).sum(Kind::Float) + skips[1].exp().sum(Kind::Float)).backward();
    let x0 = x.detach().set_requires_grad(true);
    let a = x0.sin();
    let b = (&a * 2.0).tanh();
    ((&b * &a).sum(Kind::Float) + b.exp().sum(Kind::Float)).backward();
    assert_bitwise(&x.grad(), &x0.grad(), "gradient");
}
