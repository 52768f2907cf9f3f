// Adversarial round three (ui-tests/README.md): the fix a user applies to each refused program of
// the refused programs of ui-tests/README.md, "Round three" for the other classes (closures, `?`,
// collections, `mem`, copies, generic helpers, nested checkpoints, region
// arguments, run-time policies, macros, returns, wrappers, `Option` and
// `Vec` outputs),
// compiled and run as fixes.rs runs its own: under a checkpoint with
// strict recomputation, bitwise the gradients without the checkpoint.
use remat::policies::{PolicyRule, PolicyTable};
use remat::{checkpoint, needs, region, remat, Policy, Saved};
use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::mem;
use std::rc::Rc;
use tch::{Kind, TchError, Tensor};
use crate::bitwise::same_gradients;

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn pair(h: &Tensor) -> (Tensor, Tensor) {
    (h.tanh(), h.sin())
}

fn heads(h: &Tensor) -> Vec<Tensor> {
    h.chunk(4, 0)
}

/// `closures.rs`: marked before the closure that captures it, or
/// inside it; a marked `Vec` for the iterator adapters.
#[checkpoint(enabled = on, strict = true)]
fn closures(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! {
        let a = save attention: attention(&h);
        needs a;
        let b = save second: attention(&(&h * 2));
    }
    let gate: Box<dyn Fn(&Tensor) -> Tensor> = Box::new(move |g| g * a.sigmoid());
    let read_b = || needs(&b).exp();
    let gated = gate(&h) + gate(&(&h * 2)) + read_b() * read_b();
    remat! { let parts = save heads: heads(&h); }
    let norms: Vec<Tensor> = needs(&parts).iter().map(|p| p.norm()).collect();
    let scales = [1.0, 2.0, 3.0, 4.0];
    let folded = needs(parts)
        .into_iter()
        .zip(scales)
        .fold(h.sum(Kind::Float), |acc, (p, s)| {
            acc + p.sum(Kind::Float) * s
        });
    gated.sum(Kind::Float) + Tensor::stack(&norms, 0).sum(Kind::Float) + folded
}

fn maybe_mask(h: &Tensor, on: bool) -> Option<Tensor> {
    on.then(|| h.sigmoid())
}

/// `question_mark.rs`: `needs` of what `?` and `let .. else` give,
/// or of the value the fallible methods read.
#[checkpoint(enabled = on, strict = true)]
fn question_mark(x: &Tensor, w: &Tensor, on: bool, masked: bool) -> Tensor {
    let h = x * w;
    remat! {
        let mask = save mask: maybe_mask(&h, masked);
        let a = save attention: attention(&h);
    }
    let m = (|| Some(&h * needs(mask.as_ref()?)))().unwrap_or_else(|| &h * 1);
    let y = (|| -> Result<Tensor, TchError> { needs(&a).f_exp()?.f_mul(&h) })().unwrap();
    let Some(mask) = needs(mask) else {
        return m + y;
    };
    m + y + &h * mask.relu()
}

/// `collections.rs`: a collection marked whole, or the element read.
#[checkpoint(enabled = on, strict = true)]
fn collections(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let (a, b) = save pair: pair(&h); }
    let both = needs([a, b]);
    let product = &both[0] * &both[1];
    remat! { let (c, d) = save pair_again: pair(&h); }
    let both = vec![c, d];
    let cat = Tensor::cat(needs(&both[..]), 0).sum(Kind::Float);
    remat! { let (e, f) = save pair_three: pair(&h); }
    let mut by_name = HashMap::new();
    by_name.insert("e", e);
    by_name.insert("f", f);
    let from_map = needs(&by_name["e"]).exp() + &h;
    let mut ordered: BTreeMap<&str, Tensor> = BTreeMap::new();
    ordered.insert("f", needs(by_name.remove("f").unwrap()));
    let from_tree = &ordered["f"] + &h;
    let (g, _) = remat!(save pair_four: pair(&h));
    let mut queue = VecDeque::new();
    queue.push_back(g);
    let first = needs(queue.pop_front().unwrap());
    product + cat + from_map + from_tree + first.sigmoid() * &h
}

/// `mem.rs`: marked before it moves into a tensor's place, or as it
/// comes out of a save output's place.
#[checkpoint(enabled = on, strict = true)]
fn mem_fns(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let mut g = &h * 2;
    let old = mem::replace(&mut g, needs(a));
    let replaced = &g * old;
    remat! { let mut b = save second: attention(&h); }
    let mut k = &h * 3;
    mem::swap(&mut k, needs(&mut b));
    let swapped = k.exp() + needs(b);
    remat! { let c = save third: attention(&h); }
    let mut slot = Some(c);
    let taken = needs(mem::take(&mut slot).unwrap()).exp();
    replaced + swapped + taken
}

/// `copies.rs`: marked before the copy (a view of a marked value
/// is a plain view; a view of a save output is marked as one).
#[checkpoint(enabled = on, strict = true)]
fn copies(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let reshaped = needs(&a).reshape([-1]) * 2;
    let contiguous = needs(a.transpose(0, 1)).contiguous();
    let as_double = needs(a.view([-1])).to_kind(Kind::Double).sum(Kind::Double);
    reshaped.sum(Kind::Float) + contiguous.sum(Kind::Float) + as_double.to_kind(Kind::Float)
}

fn norm<T: AsRef<Tensor>>(t: T) -> Tensor {
    t.as_ref().norm()
}

fn scaled<T: Borrow<Tensor>>(t: T, s: f64) -> Tensor {
    t.borrow() * s
}

trait Activation {
    fn apply(&self, t: &Tensor) -> Tensor;
}

struct Gelu;

impl Activation for Gelu {
    fn apply(&self, t: &Tensor) -> Tensor {
        t.gelu("none")
    }
}

/// `generic_helpers.rs`: marked at the call.
#[checkpoint(enabled = on, strict = true)]
fn generic_helpers(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let (a, b) = save pair: pair(&h); }
    norm(needs(&a)) * &h + Gelu.apply(needs(&b)) + scaled(needs(a), 2.0)
}

#[checkpoint(strict = true)]
fn inner(h: &Tensor) -> Tensor {
    h.sin()
}

/// `nested_checkpoints.rs`: metadata crosses as a number; data is
/// marked, then given to the nested checkpoint as a tensor.
#[checkpoint(enabled = on, strict = true)]
fn nested_checkpoints(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let (a, b) = save pair: pair(&h); }
    let n = a.numel() as f64;
    let scaled = checkpoint("scaled")
        .strict_recompute(true)
        .call(&h, move |h| h * 2 + n);
    let a = needs(a);
    let mixed = checkpoint("mixed")
        .strict_recompute(true)
        .call((&h, &a), |(h, a)| h * a);
    let as_input = checkpoint("as_input")
        .strict_recompute(true)
        .call(needs(&b), |b| b.exp());
    // Save outputs returned in a flat tuple, not a `Vec` inside one.
    let (s, p, q) = checkpoint("heads").strict_recompute(true).call(&h, |h| {
        let parts = region("heads", Policy::Save).call_saved(&h, |h| h.chunk(2, 0));
        let [p, q]: [Saved<Tensor>; 2] = parts.try_into().ok().unwrap();
        (h.sin(), p, q)
    });
    scaled + mixed + as_input + inner(&a) + s + Tensor::cat(&[p, q], 0)
}

fn mix_two(a: &Tensor, b: &Tensor) -> Tensor {
    a * b
}

fn double(a: &Tensor) -> Tensor {
    a * 2
}

/// `region_args.rs`: the elements of the map, and the save output
/// in the `Rc`, passed as arguments.
#[checkpoint(enabled = on, strict = true)]
fn region_args(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let (a, b) = save pair: pair(&h); }
    let by_name: HashMap<&str, Saved<Tensor>> = [("a", a), ("b", b)].into();
    let mixed = remat!(recompute mix: mix_two(&by_name["a"], &by_name["b"]));
    remat! { let (c, _d) = save pair_again: pair(&h); }
    let shared = Rc::new(c);
    mixed + remat!(recompute scale: double(&*shared))
}

/// `policies.rs`: `needs`, whatever policy runs.
#[checkpoint(enabled = on, strict = true)]
fn policies(x: &Tensor, w: &Tensor, on: bool, p: Policy) -> Tensor {
    let h = x * w;
    remat! {
        let a = region [p] attention: attention(&h);
        needs a;
        let b = auto second: attention(&(&h * 2));
        needs b;
    }
    a.exp() * &h + b
}

macro_rules! gated {
    ($h:expr, $g:expr) => {
        $h * $g.sigmoid()
    };
}

macro_rules! attention_block {
    ($a:ident, $h:expr) => {
        remat! { let $a = save attention: attention($h); }
    };
}

/// `macros.rs`: marked before (or in) an outside macro's reads, after
/// one that binds, and after a nested `remat!`.
#[checkpoint(enabled = on, strict = true)]
fn macros(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save first: attention(&h); }
    let g = gated!(&h, needs(a));
    attention_block!(b, &h);
    remat! { needs b; }
    remat! {
        let c = save third: attention(&g);
        remat! {
            let d = save fourth: attention(&(&h * 2));
        }
        needs c, d;
    }
    g + b.exp() + c * d
}

/// Not a checkpoint: its `save` output stays wrapped for its caller.
fn helper(h: &Tensor) -> Saved<Tensor> {
    remat!(save helper: attention(h))
}

/// `returned.rs`: a helper's save output marked by the caller, a
/// closure's too; a labelled block's value and a view bound to names the
/// checkpoint returns (return positions unwrap them).
#[checkpoint(enabled = on, strict = true)]
fn returned_helper_and_closure(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    let a = helper(&h);
    remat! { let b = save attention: attention(&h); }
    let take = move || -> Tensor {
        return needs(b);
    };
    needs(a).exp() + take().exp()
}

#[checkpoint(enabled = on, strict = true)]
fn returned_labelled_block(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let out = 'out: {
        break 'out a;
    };
    out
}

#[checkpoint(enabled = on, strict = true)]
fn returned_view(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let a = save attention: attention(&h); }
    let t = a.transpose(0, 1);
    t
}

struct Cache {
    attn: Saved<Tensor>,
}

/// `wrappers.rs`: marked through the wrapper (`Debug` shows the
/// metadata without a mark).
#[checkpoint(enabled = on, strict = true)]
fn wrappers(x: &Tensor, w: &Tensor, on: bool) -> Tensor {
    let h = x * w;
    remat! { let (a, b) = save pair: pair(&h); }
    let cache = Cache { attn: a };
    let from_field = needs(&cache.attn).exp();
    remat! { let (c, d) = save pair_again: pair(&h); }
    let shared = Rc::new(RefCell::new(c));
    let boxed = Box::new(d);
    let through = needs(&*RefCell::borrow(&shared)).sin() + needs(&*boxed).cos();
    assert!(format!("{b:?}").contains("size: [4, 4]"));
    let (b, e) = needs((b, remat!(save pair_three: pair(&h)).0));
    assert!(!b.equal(&e) || b.numel() == 0);
    from_field + through - b
}

fn maybe(h: &Tensor, on: bool) -> Option<Tensor> {
    on.then(|| h.tanh())
}

fn project(h: &Tensor) -> Tensor {
    h.repeat([3, 1])
}

/// `outputs.rs` and `needs_forms.rs`: an `Option` marked
/// (`needs` of an `Option<&Saved<Tensor>>` gives an `Option<&Tensor>`), an
/// element of a `Vec` output, every chunk read, a tuple's fields.
#[checkpoint(enabled = on, strict = true)]
fn outputs(x: &Tensor, w: &Tensor, on: bool, some: bool) -> Tensor {
    let h = x * w;
    remat! { let m = save maybe: maybe(&h, some); }
    let from_option = match needs(m.as_ref()) {
        Some(m) => m.exp(),
        None => &h * 1,
    };
    remat! { let parts = save heads: heads(&h); }
    let first = needs(&parts[0]) * 2;
    remat! { let qkv = save project: project(&h); }
    let [q, k, v]: [Tensor; 3] = needs(qkv.chunk(3, 0)).try_into().ok().unwrap();
    remat! { let p = save pair: pair(&h); }
    let fields = needs(&p.0).exp() * needs(&p.1);
    from_option + first.sum(Kind::Float) + q * k + v + fields
}

fn main() {
    same_gradients("closures", closures);
    for masked in [true, false] {
        same_gradients("question_mark", |x, w, on| question_mark(x, w, on, masked));
    }
    same_gradients("collections", collections);
    same_gradients("mem", mem_fns);
    same_gradients("copies", copies);
    same_gradients("generic_helpers", generic_helpers);
    same_gradients("nested_checkpoints", nested_checkpoints);
    same_gradients("region_args", region_args);
    // `auto` with and without a plan that saves it.
    let saves_second = PolicyTable::new().rule(PolicyRule::Region {
        pattern: "second".into(),
        policy: Policy::Save,
    });
    for p in [Policy::Save, Policy::Recompute, Policy::Auto] {
        same_gradients("policies", |x, w, on| policies(x, w, on, p));
        same_gradients("policies, planned", |x, w, on| {
            saves_second.scope(|| policies(x, w, on, p)).unwrap()
        });
    }
    same_gradients("macros", macros);
    same_gradients("returned_helper_and_closure", returned_helper_and_closure);
    same_gradients("returned_labelled_block", returned_labelled_block);
    same_gradients("returned_view", returned_view);
    same_gradients("wrappers", wrappers);
    for some in [true, false] {
        same_gradients("outputs", |x, w, on| outputs(x, w, on, some));
    }
}
