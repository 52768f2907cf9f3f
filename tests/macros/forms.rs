//! tch's own forms on save outputs, as model code ported from tch writes
//! them (docs/dsl.md, rules Y2, Y3 and Y5): `view([-1])`, `view((b, -1))`,
//! `permute([1, 0])` and the other views with tch's arguments; a save
//! output's metadata handed to a `&Tensor` parameter (`a.meta()`); `None`
//! for an `Option<&Tensor>` parameter in a region call; `needs` statements
//! inside an `if`, a `match` arm and a loop of a `remat!` block. Each
//! compiles and gives the gradients of the body without a checkpoint,
//! under every policy.

use crate::common::{assert_bitwise, input};
use remat::{checkpoint, remat, Policy};
use tch::{Kind, Tensor};

fn proj(x: &Tensor) -> Tensor {
    (x * 3.0 + 1.0).reshape([1, 2, 2])
}

/// An attention whose mask is optional, as tch-rs's Stable Diffusion
/// UNet's `forward(&h, None)`.
fn attend(h: &Tensor, mask: Option<&Tensor>) -> Tensor {
    match mask {
        Some(m) => h.softmax(-1, Kind::Float) * m,
        None => h.softmax(-1, Kind::Float),
    }
}

/// A helper that reads shapes only.
fn rows_of(t: &Tensor) -> i64 {
    t.size()[0]
}

#[checkpoint(name = "views", enabled = on)]
fn views(x: &Tensor, policy: Policy, on: bool) -> Tensor {
    remat! { let a = region [policy] proj: proj(x); }
    let b = a.size()[0];
    // tch's forms, before any mark.
    let flat = a.view([-1]);
    let rows = a.view((b, -1));
    let swapped = a.permute([0, 2, 1]);
    let split = a.unflatten(2, [2, 1]);
    let like = x.view_as(&a.view([2, 2]).meta());
    let grown = a.expand_as(&Tensor::zeros([3, 2, 2], (Kind::Float, x.device())));
    assert_eq!(rows_of(&a.meta()), 1);
    let (mt, tr, sw) = (a.mt(), a.view([2, 2]).tr(), a.swapaxes(1, 2));
    let moved = a.movedim([0], [2]);
    let squeezed = a.squeeze();
    remat! { needs flat, rows, swapped, split, grown, mt, tr, sw, moved, squeezed; }
    let total = flat.sum(Kind::Float)
        + rows.sum(Kind::Float)
        + (swapped * 2.0).sum(Kind::Float)
        + split.sum(Kind::Float)
        + grown.sum(Kind::Float)
        + (mt * 3.0).sum(Kind::Float)
        + (tr * 5.0).sum(Kind::Float)
        + (sw * 7.0).sum(Kind::Float)
        + moved.sum(Kind::Float)
        + squeezed.sum(Kind::Float);
    like * total
}

#[checkpoint(name = "none", enabled = on)]
fn no_mask(x: &Tensor, policy: Policy, on: bool) -> Tensor {
    remat! {
        let a = region [policy] attention: attend(x, None);
        let b = recompute masked: attend(x, Some(x));
    }
    let a = remat::needs(a);
    (a + b).sin()
}

#[checkpoint(name = "nested", enabled = on)]
fn nested_needs(x: &Tensor, policy: Policy, on: bool) -> Tensor {
    remat! {
        let a = region [policy] first: attend(x, None);
        let y = if x.size()[0] > 1 {
            needs a;
            a.exp()
        } else {
            x.zeros_like()
        };
        let c = region [policy] second: attend(x, Some(x));
        let z = match c.size()[0] {
            0 => x.zeros_like(),
            _ => {
                needs c;
                c.cos()
            }
        };
        let parts = region [policy] parts: x.chunk(2, 0);
        let mut w = x.zeros_like();
        for p in parts {
            needs p;
            w += p.sum(Kind::Float);
        }
    }
    y + z + w
}

fn check(what: &str, f: fn(&Tensor, Policy, bool) -> Tensor) {
    for policy in [Policy::Save, Policy::Recompute, Policy::OFFLOAD] {
        let plain = {
            let x = input();
            f(&x, policy, false).sum(Kind::Float).backward();
            x.grad()
        };
        let x = input();
        f(&x, policy, true).sum(Kind::Float).backward();
        assert_bitwise(&x.grad(), &plain, &format!("{what}, {policy:?}"));
    }
}

#[test]
// docs/dsl.md, rule Y5: tch's forms and the added views.
fn tch_forms_of_views_on_save_outputs() {
    check("views", views);
}

#[test]
// docs/dsl.md, rule Y3: `None` where the callee takes `Option<&Tensor>`.
fn none_for_an_optional_tensor_argument() {
    check("None", no_mask);
}

#[test]
// docs/dsl.md, rule Y2: `needs` statements where Rust statements stand.
fn needs_statements_in_nested_blocks() {
    check("nested needs", nested_needs);
}

#[test]
// docs/dsl.md, rule Y5: `meta()` holds no data; reading it fails loudly.
fn meta_is_metadata_only() {
    let x = input();
    let y = checkpoint("c").call(&x, |x| {
        let a = remat! { save proj: proj(&x) };
        let m = a.meta();
        assert_eq!(m.size(), [1, 2, 2]);
        let err = m.f_sum(Kind::Float).unwrap_err().to_string();
        assert!(
            err.contains("`Saved::meta()` is a save output's metadata only"),
            "{err}"
        );
        remat::needs(a).sum(Kind::Float) * &x
    });
    y.sum(Kind::Float).backward();
}

#[checkpoint(name = "map", enabled = on, strict = true)]
fn map_of_heads(x: &Tensor, policy: Policy, on: bool) -> Tensor {
    let mut heads = std::collections::HashMap::new();
    for (i, name) in ["q", "k"].into_iter().enumerate() {
        remat! { let h = region [policy] [format!("head{i}")]: attend(x, None); }
        heads.insert(name, h);
    }
    let heads = remat::needs(heads);
    &heads["q"] * &heads["k"]
}

#[test]
// docs/dsl.md, rule Y2: a map of save outputs, marked whole.
fn a_map_of_save_outputs_marked_whole() {
    check("map", map_of_heads);
}
