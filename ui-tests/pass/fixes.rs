// Adversarial round three (ui-tests/README.md): the fix a user applies to each refused program of
// the refused programs of ui-tests/README.md, "Round three" for the classes of shape the old analysis let through (a `needs`, or
// passing the save output to a region), compiled and run. Each runs under a
// checkpoint with strict recomputation (every save output not asked for is
// a placeholder), and gives bitwise the gradients of the same body run
// without the checkpoint (`enabled = false`). Each body reads its input
// once (`x * w`), so the weight's gradient has one path.
use remat::{checkpoint, needs, remat, Opaque};
use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use tch::{Kind, Tensor};
use crate::bitwise::same_gradients;

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn pair(h: &Tensor) -> (Tensor, Tensor) {
    (h.tanh(), h.sin())
}

fn three(h: &Tensor) -> (Tensor, Tensor, Tensor) {
    (h.tanh(), h.sin(), h.cos())
}

fn heads(h: &Tensor) -> Vec<Tensor> {
    h.chunk(4, 0)
}

fn scaled(t: &Tensor, by: Opaque<f64>) -> Tensor {
    t * by.0
}

fn mix(left: &Tensor, right: &Tensor) -> Tensor {
    left * right
}

/// `opaque.rs`: the save output as an argument of its own (opened
/// for the region's body), what is no input in `Opaque`.
#[checkpoint(enabled = on, strict = true)]
fn opaque(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save attention: attention(&h);
        let y = recompute scale: scaled(&a, Opaque(2.0));
        let z = recompute mix: mix(&a, &h);
    }
    y + z
}

fn gelu(h: &Tensor) -> Tensor {
    h.gelu("none")
}

const ACT: fn(&Tensor) -> Tensor = gelu;
static NORM: fn(&Tensor) -> Tensor = gelu;

/// `fn_pointer.rs`: marked where the pointer reads it, or the call
/// made a region.
#[checkpoint(enabled = on, strict = true)]
fn fn_pointer(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let g = ACT(needs(&a));
    remat! {
        let b = save second: attention(&g);
        let n = recompute norm: NORM(&b);
    }
    n * g
}

struct Slot<'a> {
    target: &'a mut Tensor,
}

/// `mut_refs.rs`: `needs a;` before the writes.
#[checkpoint(enabled = on, strict = true)]
fn mut_refs(x: &Tensor, w: &Tensor, on: bool, left: bool) -> Tensor {
    let h = x * w;
    let mut hs: Vec<Tensor> = (0..3).map(|i| &h * i).collect();
    remat! {
        let a = save attention: attention(&h);
        needs a;
    }
    for (i, e) in hs.iter_mut().enumerate() {
        if i == 1 {
            *e = a.shallow_clone();
        }
    }
    hs.iter_mut().for_each(|e| *e = &*e + &a);
    let mut l = &h * 2;
    let mut r = &h * 3;
    let slot = Slot { target: &mut l };
    *slot.target = &a * 2;
    let target = if left { &mut l } else { &mut r };
    *target = &*target * &a;
    Tensor::stack(&hs, 0).sum_dim_intlist(0, false, Kind::Float) + l * r
}

enum Route<T> {
    Left(T),
    Right(T),
}

/// `patterns.rs`: the names a pattern binds, marked.
#[checkpoint(enabled = on, strict = true)]
fn patterns(x: &Tensor, w: &Tensor, on: bool, left: bool) -> Tensor {
    let h = x * w;
    remat! { let (a, b, c) = save three: three(&h); }
    // An or-pattern in `let`: mark what it binds.
    let route = if left {
        Route::Left(a)
    } else {
        Route::Right(b)
    };
    let (Route::Left(t) | Route::Right(t)) = route;
    let t = needs(t);
    // In `match`: the same.
    let route = if left {
        Route::Right(t)
    } else {
        Route::Left(t)
    };
    let u = match route {
        Route::Left(t) | Route::Right(t) => &t * &h,
    };
    // A rest pattern in `let`, and in destructuring assignment.
    remat! {
        let (first, .., last) = save three_again: three(&u);
        needs first, last;
    }
    let (mut p, mut q) = (&h * 1, &h * 2);
    let before = &p * &q;
    (p, .., q) = (first, needs(c), last);
    // A rest pattern in `match`, over a marked `Vec`.
    remat! { let parts = save heads: heads(&h); }
    let ends = match needs(&parts) {
        [first, .., last] => first.exp() + last.exp(),
        _ => unreachable!("four heads"),
    };
    p * q + before + ends.sum(Kind::Float)
}

/// `slice_split.rs`: each group of save outputs marked where it is
/// read (`needs` of a `&[Saved<Tensor>]` gives a `&[Tensor]`).
#[checkpoint(enabled = on, strict = true)]
fn slice_split(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let parts = save heads: heads(&h); }
    let mut out = h.sum(Kind::Float);
    for group in parts.split(|t| t.numel() == 0) {
        out = out + Tensor::cat(needs(group), 0).exp().sum(Kind::Float);
    }
    out
}

/// `let_else.rs`: what the closure stored, marked where it is read.
#[checkpoint(enabled = on, strict = true)]
fn let_else(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let mut kept = None;
    let Some(scale) = (|| {
        kept = Some(a.shallow_clone());
        h.size().first().copied()
    })() else {
        return h * 1;
    };
    needs(kept.unwrap()).exp() * scale
}

/// `cfg_attr.rs`: the mark compiled in wherever the read is; the
/// cfg'd statement does something else.
#[checkpoint(enabled = on, strict = true)]
fn cfg_attr(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    #[cfg_attr(all(), cfg(any()))]
    let a = a.transpose(0, 1);
    let a = needs(a);
    a.exp() * &h
}

/// `macro_hygiene.rs`: `needs a;` before the macro's definition, so
/// that the `a` it names is the marked one.
#[checkpoint(enabled = on, strict = true)]
fn macro_hygiene(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save attention: attention(&h);
        needs a;
    }
    macro_rules! gate {
        ($g:expr) => {
            $g * a.sigmoid()
        };
    }
    let a = &h * 2; // shadows `a` here, not inside `gate!`
    gate!(&a)
}

/// `closure_into_receiver.rs`: `needs` inside the closure whose
/// result flows into the receiver, or of what comes out.
#[checkpoint(enabled = on, strict = true)]
fn closure_into_receiver(x: &Tensor, w: &Tensor, on: bool, given: bool) -> Tensor {
    let h = x * w;
    remat! { let (a, b) = save pair: pair(&h); }
    let mut cache: Option<Tensor> = None;
    let first = cache.get_or_insert_with(|| needs(a.shallow_clone())).exp();
    let mut saved = None;
    let second = needs(saved.get_or_insert_with(|| b.shallow_clone())).exp();
    let mut by_name: HashMap<&str, Tensor> = HashMap::new();
    let third = by_name
        .entry("attn")
        .or_insert_with(|| needs(a.shallow_clone()))
        .sin();
    let given = given.then(|| &h * 3);
    let fourth = given.unwrap_or_else(|| needs(b.shallow_clone()));
    first + second + third + fourth
}

macro_rules! both {
    ($a:ident, $b:ident) => {
        ($a, $b)
    };
}

/// `pattern_macro.rs`: the names marked.
#[checkpoint(enabled = on, strict = true)]
fn pattern_macro(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    let both!(p, q) = remat!(save pair: pair(&h));
    remat! { let both!(r, s) = save pair_again: pair(&h); }
    let (p, q) = needs((p, q));
    remat! { needs r, s; }
    p * q + r.exp() + s
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("nothing here waits"),
    }
}

/// `async.rs`: `needs a;` in the `async` block.
#[checkpoint(enabled = on, strict = true)]
fn in_async(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    block_on(async {
        remat! {
            let a = save attention: attention(&h);
            needs a;
        }
        a.exp() * &h
    })
}

fn main() {
    same_gradients("opaque", opaque);
    same_gradients("fn_pointer", fn_pointer);
    for left in [true, false] {
        same_gradients("mut_refs", |x, w, on| mut_refs(x, w, on, left));
        same_gradients("patterns", |x, w, on| patterns(x, w, on, left));
    }
    same_gradients("slice_split", slice_split);
    same_gradients("let_else", let_else);
    same_gradients("cfg_attr", cfg_attr);
    same_gradients("macro_hygiene", macro_hygiene);
    for given in [true, false] {
        same_gradients("closure_into_receiver", |x, w, on| {
            closure_into_receiver(x, w, on, given)
        });
    }
    same_gradients("pattern_macro", pattern_macro);
    same_gradients("in_async", in_async);
}
