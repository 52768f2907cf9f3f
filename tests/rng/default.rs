//! With every default, a checkpoint whose closure draws random numbers
//! recomputes with the numbers its forward drew: dropout, `rand_like`,
//! `bernoulli`, `randn` and `multinomial`, in a whole closure, around and
//! inside `save` regions that recomputation skips, and in nested
//! checkpoints; with early stop on or off, under bf16 autocast or not, and
//! through a retained graph's second backward. Gradients are bitwise those
//! of the same code without checkpoints, and the generators are as backward
//! found them when it ends (docs/semantics.md, rule C14).

use remat::autograd::{backward_with, rng_state, GeneratorLock};
use remat::diagnostics::heap_bytes_in_use;
use remat::{autocast, checkpoint, recompute_needs_tensor, region, Policy};
use remat_reference::testing::assert_bitwise;
use tch::{Device, Kind, Tensor};

/// A random op the gradient depends on.
#[derive(Clone, Copy, Debug)]
enum Draw {
    Dropout,
    RandLike,
    Bernoulli,
    Randn,
    Multinomial,
}

impl Draw {
    const ALL: [Draw; 5] = [
        Draw::Dropout,
        Draw::RandLike,
        Draw::Bernoulli,
        Draw::Randn,
        Draw::Multinomial,
    ];

    fn apply(self, x: &Tensor) -> Tensor {
        match self {
            Draw::Dropout => x.dropout(0.5, true),
            Draw::RandLike => x * x.rand_like(),
            Draw::Bernoulli => x * x.detach().bernoulli_p(0.5),
            Draw::Randn => x * Tensor::randn(x.size(), (x.kind(), x.device())),
            // Columns picked at random, with the row's softmax as weights.
            Draw::Multinomial => {
                let columns = x.size()[1];
                let picked = x
                    .detach()
                    .softmax(-1, Kind::Float)
                    .multinomial(columns, true);
                x.gather(-1, &picked, false)
            }
        }
    }
}

/// Where the draws are.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// The whole closure recomputes.
    Whole,
    /// A `save` region before the first draw, one that draws between two
    /// draws of bare code (recomputation skips its draw), one after them.
    Regions,
    /// Draws in an outer checkpoint, in one nested in it, and in a `save`
    /// region of the outer one.
    Nested,
}

#[derive(Clone, Copy, Debug)]
struct Options {
    early_stop: bool,
    autocast: bool,
    /// Two backwards through a retained graph.
    retain: bool,
}

/// The model, with its checkpoints on, or the same code run plainly.
fn forward(x: &Tensor, shape: Shape, draw: Draw, on: bool, early_stop: bool) -> Tensor {
    match shape {
        Shape::Whole => checkpoint("whole")
            .enabled(on)
            .early_stop(early_stop)
            .call(x, move |x| draw.apply(&(x.tanh() * 3)).sin() * &x),
        Shape::Regions => checkpoint("regions")
            .enabled(on)
            .early_stop(early_stop)
            .call(x, move |x| {
                let a = region("before", Policy::Save).call(&x, |x| x.exp());
                recompute_needs_tensor(&a);
                let h = draw.apply(&(a.tanh() * 3));
                let b = region("drawing", Policy::Save).call(&h, move |h| draw.apply(&h.sin()));
                recompute_needs_tensor(&b);
                let k = draw.apply(&b.cos());
                let c = region("after", Policy::Save).call(&k, |k| k.exp());
                recompute_needs_tensor(&c);
                c.sin() * &x
            }),
        Shape::Nested => checkpoint("outer")
            .enabled(on)
            .early_stop(early_stop)
            .call(x, move |x| {
                let h = draw.apply(&x.sin());
                let i = checkpoint("inner")
                    .enabled(on)
                    .early_stop(early_stop)
                    .call(&h, move |h| draw.apply(&h.tanh()).exp());
                let j = region("drawing", Policy::Save).call(&i, move |i| draw.apply(&i.cos()));
                recompute_needs_tensor(&j);
                draw.apply(&j).sin() * &x
            }),
    }
}

/// The gradient of the model's sum, from a fixed seed, and whether backward
/// left the CPU generator as it found it.
fn gradient(shape: Shape, draw: Draw, on: bool, options: Options) -> (Tensor, bool) {
    let x = Tensor::linspace(-1.0, 1.0, 8 * 16, (Kind::Float, Device::Cpu))
        .reshape([8, 16])
        .set_requires_grad(true);
    tch::manual_seed(7);
    let run = || forward(&x, shape, draw, on, options.early_stop);
    let y = if options.autocast {
        autocast(Device::Cpu, Kind::BFloat16, run)
    } else {
        run()
    };
    let loss = y.sum(Kind::Float);
    let before = rng_state(Device::Cpu).unwrap();
    for _ in 0..if options.retain { 2 } else { 1 } {
        backward_with(&loss, options.retain).unwrap();
    }
    let untouched = rng_state(Device::Cpu).unwrap().equal(&before);
    (x.grad().copy(), untouched)
}

#[test]
// docs/semantics.md, rule C14, with rules C17 (early stop), A2 (autocast)
// and C8 (a retained graph recomputes again).
fn every_draw_recomputes_the_forward_numbers_with_every_default() {
    let _rng = GeneratorLock::acquire();
    tch::set_num_threads(1);
    for draw in Draw::ALL {
        for shape in [Shape::Whole, Shape::Regions, Shape::Nested] {
            for early_stop in [false, true] {
                for autocast in [false, true] {
                    for retain in [false, true] {
                        let options = Options {
                            early_stop,
                            autocast,
                            retain,
                        };
                        let what = format!("{draw:?} in {shape:?}, {options:?}");
                        let (plain, _) = gradient(shape, draw, false, options);
                        let (remat, untouched) = gradient(shape, draw, true, options);
                        assert_bitwise(&remat, &plain, &what);
                        assert!(untouched, "{what}: backward moved the caller's generator");
                    }
                }
            }
        }
    }
}

#[test]
// docs/semantics.md, rule C14: without the kept state the same comparison
// fails, for the whole closure and for the draw after a skipped region.
fn opted_out_recomputation_draws_other_numbers() {
    let _rng = GeneratorLock::acquire();
    tch::set_num_threads(1);
    let options = Options {
        early_stop: false,
        autocast: false,
        retain: false,
    };
    let x = || {
        Tensor::linspace(-1.0, 1.0, 8 * 16, (Kind::Float, Device::Cpu))
            .reshape([8, 16])
            .set_requires_grad(true)
    };
    let (plain, _) = gradient(Shape::Whole, Draw::Dropout, false, options);
    let x1 = x();
    tch::manual_seed(7);
    checkpoint("whole")
        .preserve_rng_state(false)
        .call(&x1, |x| Draw::Dropout.apply(&(x.tanh() * 3)).sin() * &x)
        .sum(Kind::Float)
        .backward();
    assert!(
        !x1.grad().equal(&plain),
        "an opted-out checkpoint drew the same mask"
    );
}

/// The C heap's growth over the forward of 64 chained checkpoints whose
/// closures `draw` or not, kept alive with their graph.
fn kept_by_forward(draw: bool, preserve: bool) -> i64 {
    let x = Tensor::ones([4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let before = heap_bytes_in_use().expect("glibc's heap counters") as i64;
    let mut y = x.shallow_clone();
    for i in 0..64 {
        y = checkpoint(format!("c{i}"))
            .preserve_rng_state(preserve)
            .call(&y, move |y| {
                if draw {
                    y.dropout(0.5, true).sin()
                } else {
                    y.sin()
                }
            });
    }
    let grown = heap_bytes_in_use().expect("glibc's heap counters") as i64 - before;
    drop(y);
    grown
}

#[test]
// docs/semantics.md, rule C14: a forward that draws nothing keeps no
// snapshot; one that draws keeps the CPU generator's state (5 KB) per
// checkpoint. Measured by glibc's heap, not by remat's records.
fn a_closure_that_draws_nothing_keeps_nothing_of_the_generators() {
    let _rng = GeneratorLock::acquire();
    tch::set_num_threads(1);
    // Warm up: first calls allocate tables that stay.
    for _ in 0..2 {
        kept_by_forward(true, true);
        kept_by_forward(false, false);
    }
    let median = |draw, preserve| {
        let mut runs: Vec<i64> = (0..5).map(|_| kept_by_forward(draw, preserve)).collect();
        runs.sort();
        runs[2]
    };
    let quiet_on = median(false, true);
    let quiet_off = median(false, false);
    let drawing_on = median(true, true);
    let drawing_off = median(true, false);
    // 64 snapshots of the CPU engine are 2.5 KB each; up to 16 come from
    // the thread's pool of freed ones (csrc/generators.cpp), so at least 48
    // are new.
    assert!(
        drawing_on - drawing_off >= 48 * 2_500,
        "a drawing closure keeps its generators' state: {drawing_on} vs {drawing_off} bytes"
    );
    assert!(
        (quiet_on - quiet_off).abs() < 32 * 1_000,
        "a closure that draws nothing keeps no snapshot: {quiet_on} vs {quiet_off} bytes"
    );
}
