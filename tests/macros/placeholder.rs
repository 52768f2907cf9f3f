//! A read the types let through fails at replay. With the macros the
//! mistake is a `needs` that only replay reaches (the forward reads the
//! alias `on_forward` gives): the path check stops it at the mark, naming
//! it (docs/semantics.md, rule R11); with that check off
//! (`Determinism::None`), the mark refuses the placeholder with the same
//! message as the runtime API's read without `recompute_needs_tensor`: the
//! two layers agree.

use remat::{checkpoint, needs, region, remat, Policy};
use remat_reference::macros::{Block, BlockPolicy};
use remat_reference::model::{self as reference, batch, Model, ModelPolicy, SMALL};
use tch::{Device, Kind, Tensor};

/// A helper that reads its argument's data.
fn residual(x: &Tensor, attn: &Tensor) -> Tensor {
    x + attn
}

/// A method of the reference crate's `Block`, added here.
trait Leaky {
    fn leaky(&self, x: &Tensor) -> Tensor;
    fn leaky_unchecked(&self, x: &Tensor) -> Tensor;
}

impl Leaky for Block {
    /// `selective` whose forward reads `attn` through `on_forward`, so that
    /// nothing asks for it, and whose `needs` only replay reaches (docs/dsl.md,
    /// rules Y6 and Y8). Without a mark at all, this does not compile: see
    /// ui-tests/fail/bare_read.rs.
    #[checkpoint(name = [format!("layers.{}", self.index)])]
    fn leaky(&self, x: &Tensor) -> Tensor {
        leaky_body(self, x)
    }

    /// The same, with the path check off: only the count of saves is checked.
    #[checkpoint(name = [format!("layers.{}", self.index)], determinism = None)]
    fn leaky_unchecked(&self, x: &Tensor) -> Tensor {
        leaky_body(self, x)
    }
}

/// The body of both: `attn` read through `on_forward`, marked only where
/// replay reaches.
fn leaky_body(block: &Block, x: &Tensor) -> Tensor {
    let h = block.ln1.forward(x);
    remat! { let attn = save attention: block.attention.forward(&h); }
    let attn = match attn.on_forward() {
        Some(attn) => attn,
        None => needs(attn),
    };
    remat! {
        let x = residual(x, &attn);
        let m = recompute mlp: block.mlp.forward(&block.ln2.forward(&x));
    }
    x + m
}

/// The same mistake with the runtime API: no `recompute_needs_tensor`.
fn leaky_api(p: &reference::Block, x: &Tensor) -> Tensor {
    let p = p.shallow();
    remat::checkpoint(format!("layers.{}", p.index)).call(x, move |x| {
        let d = p.cfg.d;
        let h = reference::ln(&x, &p.ln1_w, &p.ln1_b, d);
        let attn = region("attention", Policy::Save).call(&h, |h| reference::attention(&p, h));
        let x = residual(&x, &attn);
        let h = reference::ln(&x, &p.ln2_w, &p.ln2_b, d);
        let m = region("mlp", Policy::Recompute).call(&h, |h| reference::mlp(&p, h));
        x + m
    })
}

/// The error of the backward through one leaky block.
fn backward_error(block: impl FnOnce(&Model, &Tensor) -> Tensor) -> String {
    let model = Model::new(SMALL, 3);
    let (tokens, _) = batch(SMALL, 5);
    let x = Tensor::embedding(&model.tok_emb, &tokens, -1, false, false);
    let y = block(&model, &x);
    // The forward runs: the placeholder is only met on replay.
    assert_eq!(y.size(), x.size());
    let err = y
        .sum(Kind::Float)
        .f_backward()
        .expect_err("replay must fail on the placeholder");
    err.to_string()
}

#[test]
// docs/semantics.md, rule R11 (E36): the mark only replay reaches is where
// the recomputation leaves its forward's path.
fn a_needs_only_replay_reaches_fails_at_the_mark_naming_it() {
    let macros = backward_error(|m, x| Block::of(&m.blocks[1]).leaky(x));
    let head = macros.lines().next().unwrap_or_default();
    for part in [
        "checkpoint `layers.1`: recomputation left its forward's path",
        "its recomputation marked `layers.1::attention.out` with `needs` at tests/macros/placeholder.rs:",
        "where its forward asked for no such output",
        "before it entered region `layers.1::mlp` (`recompute`, 1 tensor input)",
    ] {
        assert!(head.contains(part), "{part}: {head}");
    }
}

#[test]
// docs/dsl.md, rules Y6 and Y8; docs/semantics.md, rule P4 (E13).
fn without_the_path_check_the_mark_refuses_the_placeholder_like_the_runtime_api() {
    let macros = backward_error(|m, x| Block::of(&m.blocks[1]).leaky_unchecked(x));
    let api = backward_error(|m, x| leaky_api(&m.blocks[1], x));
    for text in [&macros, &api] {
        assert!(
            text.contains("`layers.1::attention.out` is a placeholder"),
            "{text}"
        );
        assert!(text.contains("recompute_needs_tensor"), "{text}");
    }
    // The typed program fails at the mark, before any read, saying why;
    // then the same runtime error as the untyped one (up to libtorch's
    // backtrace, which names different source lines).
    let head = |s: &str| s.lines().next().unwrap_or_default().to_string();
    let (macros, api) = (head(&macros), head(&api));
    let why = "`needs` was handed a placeholder: the forward did not mark this save output";
    assert!(macros.contains(why), "{macros}");
    assert!(!api.contains(why), "{api}");
    let placeholder = |s: &str| s[s.find("`layers.1::attention.out`").unwrap()..].to_string();
    assert_eq!(placeholder(&macros), placeholder(&api));
}

/// With the mark, the same block replays fine.
#[test]
// docs/dsl.md, rule Y2; docs/semantics.md, rule K4.
fn the_marked_block_replays() {
    let model = Model::new(SMALL, 3);
    let x = Tensor::randn([SMALL.b, SMALL.t, SMALL.d], (Kind::Float, Device::Cpu))
        .set_requires_grad(true);
    let y = Block::of(&model.blocks[0]).forward(&x, BlockPolicy::of(ModelPolicy::Selective));
    y.sum(Kind::Float).f_backward().expect("backward");
    assert!(x.grad().defined());
}
