//! A user's own types as region and checkpoint outputs
//! (`#[derive(RegionOutput)]`, docs/dsl.md rule Y10): a struct with named
//! fields, a tuple struct, an enum, a type nesting others, each returned by
//! regions under every policy and a plan, nested in tuples and `Vec`s,
//! marked with `needs`, passed to regions and returned from checkpoints;
//! the gradients are the body's without a checkpoint, bit for bit, under
//! strict recomputation too.

use crate::common::{assert_bitwise, input};
use remat::io::RegionOutput;
use remat::planner::{Choice, LayerPlan, Plan, Prediction, Target};
use remat::{checkpoint, needs, region, remat, Policy};
use tch::{Kind, Tensor};

/// An attention's output and its log-sum-exp.
#[derive(RegionOutput)]
pub struct Attention {
    pub out: Tensor,
    pub lse: Tensor,
}

/// A pair whose second half may be absent.
#[derive(RegionOutput)]
pub struct Pair(pub Tensor, pub Option<Tensor>);

/// A key-value cache of one of three shapes.
#[derive(RegionOutput)]
pub enum Cache {
    Empty,
    Full { k: Tensor, v: Vec<Tensor> },
    Packed((Tensor, Tensor)),
}

/// Derived types inside a derived type.
#[derive(RegionOutput)]
#[remat(saved = HeldBlock)]
pub struct Block {
    pub attention: Attention,
    pub pairs: Vec<Pair>,
    pub cache: Cache,
}

fn attend(x: &Tensor) -> Attention {
    let s = x * 3.0 + 1.0;
    Attention {
        lse: s.logsumexp([-1], true),
        out: s.sin(),
    }
}

fn block_of(x: &Tensor, full: bool) -> Block {
    Block {
        attention: attend(x),
        pairs: vec![Pair(x.exp(), None), Pair(x.cos(), Some(x * 2.0))],
        cache: if full {
            Cache::Full {
                k: x.tanh(),
                v: vec![x * 5.0, x.square()],
            }
        } else {
            Cache::Packed((x.tanh(), x * 7.0))
        },
    }
}

/// Reads every tensor of a block.
fn read(b: &Block) -> Tensor {
    let cache = match &b.cache {
        Cache::Empty => b.attention.lse.zeros_like(),
        Cache::Full { k, v } => k + &v[0] + &v[1],
        Cache::Packed((a, c)) => a + c,
    };
    let pairs = b
        .pairs
        .iter()
        .map(|p| match &p.1 {
            Some(q) => &p.0 * q,
            None => p.0.shallow_clone(),
        })
        .fold(cache, |acc, t| acc + t);
    (&b.attention.out + &b.attention.lse).sin() + pairs
}

fn pair_and(x: &Tensor) -> (Pair, Tensor) {
    (Pair(x.sin(), None), x.cos())
}

fn many(x: &Tensor) -> Vec<Attention> {
    vec![attend(x), attend(&x.cos())]
}

/// A region of `policy` returning a derived type, marked; a `recompute`
/// region receiving its saved form (opened); a tuple and a `Vec` of them.
#[checkpoint(name = "c", enabled = on, strict = strict)]
fn model(x: &Tensor, policy: Policy, full: bool, on: bool, strict: bool) -> Tensor {
    remat! {
        let b = region [policy] block: block_of(x, full);
        let (p, t) = region [policy] pair: pair_and(x);
        let many = region [policy] many: many(x);
    }
    // Metadata of a field, without marking.
    assert_eq!(b.fields().attention.fields().out.size(), x.size());
    let first = remat! { recompute first: read(&b) };
    let p = needs(p);
    let t = needs(t);
    let many = needs(many);
    let tail: Tensor = many
        .iter()
        .map(|a| &a.out * &a.lse)
        .fold(t, |acc, s| acc + s);
    first + p.0 * tail
}

/// The same through the runtime API: `call_saved` gives the saved form.
fn model_api(x: &Tensor, policy: Policy, on: bool) -> Tensor {
    checkpoint("c").enabled(on).call(x, move |x| {
        let a: remat::Saved<Attention> = region("attention", policy).call_saved(&x, attend);
        let a = needs(a);
        (&a.out * &a.lse).sum_to_size(x.size()) + &x
    })
}

fn grads(f: impl Fn(&Tensor, bool) -> Tensor) -> (Tensor, Tensor) {
    let plain = {
        let x = input();
        f(&x, false).sum(Kind::Float).backward();
        x.grad()
    };
    let x = input();
    f(&x, true).sum(Kind::Float).backward();
    (x.grad(), plain)
}

#[test]
// docs/dsl.md, rule Y10; docs/semantics.md, rules R7 and C10.
fn derived_types_are_outputs_under_every_policy() {
    for policy in [
        Policy::Save,
        Policy::Recompute,
        Policy::OFFLOAD,
        Policy::Auto,
    ] {
        for full in [true, false] {
            for strict in [false, true] {
                let (got, want) = grads(|x, on| model(x, policy, full, on, strict));
                let what = format!("{policy:?}, full cache {full}, strict {strict}");
                assert_bitwise(&got, &want, &what);
            }
        }
        let (got, want) = grads(|x, on| model_api(x, policy, on));
        assert_bitwise(&got, &want, &format!("runtime API, {policy:?}"));
    }
}

#[test]
// docs/semantics.md, rule R3: `auto` regions returning derived types under
// a plan that saves them.
fn derived_types_are_outputs_under_a_plan() {
    let layer = |regions: &[&str]| LayerPlan {
        name: "c".into(),
        regions: regions.iter().map(|r| r.to_string()).collect(),
        choice: Choice {
            checkpointed: true,
            save: vec![true; regions.len()],
            offload: vec![false; regions.len()],
        },
        inputs: None,
    };
    let plan = Plan {
        target: Target::Kept,
        budget: None,
        layers: vec![layer(&["block", "pair", "many"])],
        predicted: Prediction {
            kept_bytes: 0,
            peak_bytes: 0,
            replay_ns: 0,
            spread_ns: 0,
        },
    };
    let (got, want) = grads(|x, on| plan.scope(|| model(x, Policy::Auto, true, on, false)));
    assert_bitwise(&got, &want, "under a plan");
}

/// Returned from a checkpoint, as its saved form (unwrapped on the way out)
/// and as the plain value, alone and in a tuple.
#[checkpoint(name = "returns", enabled = on)]
fn returns(x: &Tensor, on: bool) -> (Attention, Pair) {
    remat! {
        let a = save attention: attend(x);
        let p = recompute pair: Pair(x.exp(), Some(x.sin()));
    }
    (a, p)
}

#[test]
// docs/dsl.md, rule Y4: a derived type's saved form leaves the checkpoint
// as the plain type.
fn derived_types_are_checkpoint_outputs() {
    let (got, want) = grads(|x, on| {
        let (a, p) = returns(x, on);
        (a.out + a.lse) * p.0 + p.1.expect("present")
    });
    assert_bitwise(&got, &want, "returned");
    let (got, want) = grads(|x, on| {
        let b = checkpoint("whole")
            .enabled(on)
            .call(x, |x| block_of(&x, true));
        read(&b)
    });
    assert_bitwise(&got, &want, "a derived type returned by a closure");
}

#[test]
// The saved form prints metadata only.
fn the_saved_form_prints_metadata() {
    let x = input();
    let shown = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let s = shown.clone();
    let y = checkpoint("c").call(&x, move |x| {
        let a = region("a", Policy::Save).call_saved(&x, attend);
        *s.lock().unwrap() = format!("{a:?}");
        let a = needs(a);
        a.out + a.lse
    });
    y.sum(Kind::Float).backward();
    let shown = shown.lock().unwrap();
    assert!(
        shown.starts_with("[Saved { size: [2, 2], kind: Float"),
        "{shown}"
    );
}
