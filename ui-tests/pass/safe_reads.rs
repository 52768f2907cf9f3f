// Adversarial round three (ui-tests/README.md): programs that try to make bare code read a save
// output during recomputation and that rustc accepts as written, because
// what they do with it is safe: metadata and `Debug`, a metadata branch,
// laundering it through a `recompute` region (which asks for it), a
// region's receiver that marks what it holds, a save region given a save
// output, nested checkpoints returning their save outputs to a reader (a
// `Vec` of them in a tuple too), a
// mark inside a closure called twice, marks in both arms of a branch, a
// `Box<dyn Any>` round trip, and early stop. Each gives, under strict
// recomputation, bitwise the gradients without the checkpoint.
use remat::{checkpoint, needs, region, remat, Policy, Saved};
use std::any::Any;
use tch::{Kind, Tensor};
use crate::bitwise::same_gradients;

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn identity(h: &Tensor) -> Tensor {
    h.shallow_clone()
}

/// `Debug` and metadata read no data: a placeholder has them.
#[checkpoint(enabled = on, strict = true)]
fn metadata_branch(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let shown = format!("{a:?}");
    assert!(shown.contains("[4, 4]") && !shown.contains("data"));
    if a.size()[0] > 2 && a.kind() == Kind::Float {
        &h * a.numel() as f64
    } else {
        &h * 0.5
    }
}

/// A `recompute` region that hands a save output back: its output is a
/// plain tensor, and the region asked for its input (docs/semantics.md,
/// K2), so recomputation runs it on the kept value.
#[checkpoint(enabled = on, strict = true)]
fn through_a_recompute_region(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save attention: attention(&h);
        let b = recompute launder: identity(&a);
    }
    b.exp() * &h
}

/// A user struct holding a save output, as the receiver of regions whose
/// code marks it before reading: on the forward, where the `recompute`
/// region and the `save` region both run, the mark asks for it.
struct Gate {
    gate: Saved<Tensor>,
}

impl Gate {
    fn apply(&self, h: &Tensor) -> Tensor {
        h * needs(&self.gate).sigmoid()
    }
}

#[checkpoint(enabled = on, strict = true)]
fn receiver_marks(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let g = save gate: attention(&h); }
    let gate = Gate { gate: g };
    remat! {
        let y = recompute gated: gate.apply(&h);
        let z = save gated_saved: gate.apply(&y);
        needs z;
    }
    y + z
}

/// A save output given to a `save` region (which does not ask for it,
/// docs/semantics.md K3: it is skipped on recomputation too); its output is
/// a save output of its own, marked.
#[checkpoint(enabled = on, strict = true)]
fn save_of_a_save(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save first: attention(&h);
        let b = save second: attention(&a);
        needs b;
    }
    b * &h
}

#[checkpoint(strict = true)]
fn inner_returns_its_save(h: &Tensor) -> (Tensor, Tensor) {
    remat! {
        let a = save attention: attention(h);
        let b = save second: attention(&(h * 2));
    }
    (a, b)
}

/// Nested checkpoints return their save outputs unmarked (docs/semantics.md
/// K5); the outer checkpoint's bare code reads them as tensors, and the
/// runtime asks the outer checkpoint to keep them (K8).
#[checkpoint(enabled = on, strict = true)]
fn nested_returns(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    let (a, b) = inner_returns_its_save(&h);
    let c = checkpoint("runtime_inner")
        .strict_recompute(true)
        .call(&h, |h| {
            region("third", Policy::Save).call_saved(&h, |h| h.sin())
        });
    a.exp() * b + c.cos()
}

/// A nested checkpoint returns a tuple holding a `Vec` of its save outputs
/// (docs/semantics.md, rule C10): the caller gets tensors, nested as built.
#[checkpoint(enabled = on, strict = true)]
fn returns_a_vec_in_a_tuple(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    let (s, parts) = checkpoint("heads").strict_recompute(true).call(&h, |h| {
        let parts = region("heads", Policy::Save).call_saved(&h, |h| h.chunk(2, 0));
        (h.sin(), parts)
    });
    let parts: Vec<Tensor> = parts;
    s * (parts[0].exp().sum(Kind::Float) + parts[1].cos().sum(Kind::Float))
}

/// A mark inside a closure, which runs on the forward and again on
/// recomputation, twice each.
#[checkpoint(enabled = on, strict = true)]
fn closure_marks(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let read = || needs(&a).exp();
    read() * read() + &h
}

/// Marks in both arms of a branch, which the forward and recomputation
/// take alike.
#[checkpoint(enabled = on, strict = true)]
fn both_arms(x: &Tensor, w: &Tensor, on: bool, left: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save first: attention(&h);
        let b = save second: attention(&(&h * 2));
    }
    let y = if left {
        needs(&a).exp()
    } else {
        needs(&b).sin()
    };
    y * &h
}

/// Through `Box<dyn Any>`: a save output downcasts to `Saved<Tensor>`, not
/// to `Tensor`.
#[checkpoint(enabled = on, strict = true)]
fn any_round_trip(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let boxed: Box<dyn Any> = Box::new(a);
    assert!(boxed.downcast_ref::<Tensor>().is_none());
    let a = boxed.downcast::<Saved<Tensor>>().ok().unwrap();
    needs(*a) * &h
}

/// Early stop: recomputation ends after the last save backward reads, so
/// the tail's reads do not run again; the marks are what the forward asked.
#[checkpoint(enabled = on, early_stop = stop)]
fn early_stop(x: &Tensor, w: &Tensor, on: bool, stop: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save attention: attention(&h);
        needs a;
        let g = &h * &a;
        let b = save second: attention(&g);
        needs b;
    }
    let t = &g * &b;
    t.sum(Kind::Float) * 2
}

fn main() {
    same_gradients("metadata_branch", metadata_branch);
    same_gradients("through_a_recompute_region", through_a_recompute_region);
    same_gradients("receiver_marks", receiver_marks);
    same_gradients("save_of_a_save", save_of_a_save);
    same_gradients("nested_returns", nested_returns);
    same_gradients("returns_a_vec_in_a_tuple", returns_a_vec_in_a_tuple);
    same_gradients("closure_marks", closure_marks);
    for left in [true, false] {
        same_gradients("both_arms", |x, w, on| both_arms(x, w, on, left));
    }
    same_gradients("any_round_trip", any_round_trip);
    // Not strict (strict recomputation never stops early); with the
    // environment's `REMAT_STRICT_RECOMPUTE=1` it is strict anyway.
    for stop in [true, false] {
        same_gradients("early_stop", |x, w, on| early_stop(x, w, on, stop));
    }
}
