//! `remat::nn` in place of `tch::nn` where the swap of the import alone did
//! not compile: tch's lifetime on `Func<'a>`/`FuncT<'a>`, helpers that
//! return `impl ModuleT`, and a tch module remat does not mirror inside
//! `seq()`. Each checkpointed model's gradient is bit-identical to the same
//! model's without checkpoints.

use crate::common::assert_bitwise;
use remat::autograd::GeneratorLock;
use remat::nn::{self, Module, ModuleT, Shared};
use remat::prelude::*;
use tch::Kind;

// tch's own signatures, with the lifetime tch's `Func` and `FuncT` carry.
fn activation<'a>() -> nn::Func<'a> {
    nn::func(|xs| xs.gelu("none"))
}

fn dropout<'a>(p: f64) -> nn::FuncT<'a> {
    nn::func_t(move |xs, train| xs.dropout(p, train))
}

/// tch's field types, `'static` as tch code stores them.
#[derive(Capture)]
struct Head {
    act: nn::Func<'static>,
    drop: nn::FuncT<'static>,
}

impl Head {
    fn plain(&self, x: &Tensor) -> Tensor {
        x.apply(&self.act).apply_t(&self.drop, true)
    }

    #[checkpoint(name = "head", state_hooks = [RngStateHook::cpu()])]
    fn checkpointed(&self, x: &Tensor) -> Tensor {
        x.apply(&self.act).apply_t(&self.drop, true)
    }
}

fn conv_bn(vs: &nn::Path, c: i64) -> nn::SequentialT {
    let cfg = nn::ConvConfig {
        padding: 1,
        ..Default::default()
    };
    nn::seq_t()
        .add(nn::conv2d(vs / "conv", c, c, 3, cfg))
        .add(nn::batch_norm2d(vs / "bn", c, Default::default()))
}

/// A helper whose return type names `Capture` next to `ModuleT`.
fn stem(vs: &nn::Path, c: i64) -> impl nn::ModuleT + Capture {
    conv_bn(vs, c)
}

/// The helper as tch code writes it: only `ModuleT` is visible to callers.
fn stem_opaque(vs: &nn::Path, c: i64) -> impl nn::ModuleT {
    conv_bn(vs, c)
}

fn images() -> Tensor {
    Tensor::linspace(-1.0, 1.0, 2 * 2 * 5 * 5, tch::kind::FLOAT_CPU)
        .view([2, 2, 5, 5])
        .set_requires_grad(true)
}

/// The input's gradient of `loss`, on a model `build` makes after seeding.
fn grad<M>(build: impl Fn(&nn::Path) -> M, loss: impl Fn(&M, &Tensor) -> Tensor) -> Tensor {
    tch::set_num_threads(1);
    let _rng = GeneratorLock::seeded(13);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let model = build(&vs.root());
    let x = images();
    loss(&model, &x).sum(Kind::Float).backward();
    x.grad()
}

#[test]
fn func_and_func_t_with_tch_lifetimes_are_captured() {
    let build = |_: &nn::Path| Head {
        act: activation(),
        drop: dropout(0.5),
    };
    assert_bitwise(
        &grad(build, |head, x| head.checkpointed(x)),
        &grad(build, |head, x| head.plain(x)),
        "gradient through Func<'static> and FuncT<'static>",
    );
}

#[test]
fn a_helper_returning_impl_module_t_and_capture_is_captured() {
    let build = |vs: &nn::Path| stem(vs, 2);
    let remat = grad(build, |stem, x| {
        let owned = stem.capture();
        checkpoint("stem").call(x, move |x| owned.forward_t(&x, true).relu())
    });
    let plain = grad(build, |stem, x| stem.forward_t(x, true).relu());
    assert_bitwise(&remat, &plain, "gradient through `impl ModuleT + Capture`");
}

#[test]
fn a_helper_returning_impl_module_t_is_captured_through_shared() {
    let build = |vs: &nn::Path| Shared::new(stem_opaque(vs, 2));
    let remat = grad(build, |stem, x| {
        let owned = stem.clone(); // the same module
        checkpoint("stem").call(x, move |x| owned.forward_t(&x, true).relu())
    });
    let plain = grad(build, |stem, x| stem.forward_t(x, true).relu());
    assert_bitwise(&remat, &plain, "gradient through `Shared<impl ModuleT>`");
}

#[test]
fn a_module_remat_does_not_mirror_goes_into_seq_through_shared() {
    let build = |vs: &nn::Path| {
        let up = Shared::new(nn::conv_transpose2d(vs / "up", 2, 2, 3, Default::default()));
        nn::seq().add_fn(move |xs| up.forward(xs)).add(activation())
    };
    let remat = grad(build, |seq, x| {
        let owned = seq.capture();
        checkpoint("up").call(x, move |x| owned.forward(&x))
    });
    let plain = grad(build, |seq, x| seq.forward(x));
    assert_bitwise(&remat, &plain, "gradient through a shared conv_transpose2d");
}
