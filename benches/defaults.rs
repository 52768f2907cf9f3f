//! What the safe defaults cost: the random state every checkpoint keeps
//! (docs/semantics.md, rules C14 and C20) and the path check of
//! `Determinism::Metadata` (rule R11), each against its switch turned off.
//! Per checkpoint, per `save` region and per region or mark on chains of
//! the cheapest ops; per step of the reference model's medium config under
//! `full`, `selective` and `save_mlp`. Variants alternate run by run, so a
//! slow stretch of a shared machine hits both; prints medians with the
//! interquartile range and the ratio. `cargo bench --bench defaults
//! [ROUNDS]`; docs/performance.md ("The safe defaults") records a run.

use remat::{checkpoint, needs, region, Checkpoint, Determinism, Policy};
use remat_reference::model::{block_body, Block, Model, ModelPolicy, MEDIUM, SMALL};
use std::time::{Duration, Instant};
use tch::{kind::FLOAT_CPU, Kind, Tensor};

const CHAIN: usize = 100;

/// Lower quartile, median and upper quartile of `v`.
fn quartiles(mut v: Vec<f64>) -> [f64; 3] {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [at(0.25), at(0.5), at(0.75)]
}

/// The two settings a comparison alternates: off, then on.
#[derive(Clone, Copy)]
struct Switch {
    rng: bool,
    path: bool,
}

impl Switch {
    /// Checkpoint `c` with the random state and the path check as switched.
    fn checkpoint(self) -> Checkpoint {
        self.named("c")
    }

    /// Checkpoint `name`, likewise.
    fn named(self, name: impl Into<String>) -> Checkpoint {
        let determinism = if self.path {
            Determinism::Metadata
        } else {
            Determinism::None
        };
        checkpoint(name)
            .preserve_rng_state(self.rng)
            .determinism(determinism)
    }
}

fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// `CHAIN` checkpoints in a row, each `sin` (or dropout, `draw`) of 4
/// floats, forward + backward.
fn checkpoints(s: Switch, draw: bool) -> Duration {
    let x = Tensor::ones([4], FLOAT_CPU).set_requires_grad(true);
    timed(|| {
        let mut h = x.shallow_clone();
        for _ in 0..CHAIN {
            h = s.checkpoint().call(
                &h,
                move |h| if draw { h.dropout(0.5, true) } else { h.sin() },
            );
        }
        h.sum(Kind::Float).backward();
    })
}

/// One checkpoint of `CHAIN` `save` regions (`sin`, marked), forward +
/// backward: the exit comparison of each region, and each mark's record
/// and check.
fn save_regions(s: Switch) -> Duration {
    let x = Tensor::ones([4], FLOAT_CPU).set_requires_grad(true);
    timed(|| {
        let y = s.checkpoint().call(&x, |x| {
            let mut h = x;
            for i in 0..CHAIN {
                let a = region(format!("s{i}"), Policy::Save).call_saved(&h, |h| h.sin());
                h = needs(a);
            }
            h
        });
        y.sum(Kind::Float).backward();
    })
}

/// One checkpoint of `2 * CHAIN` `recompute` regions that save nothing
/// (`* 1.0`): the path's record and check per region, alone.
fn recompute_regions(s: Switch) -> Duration {
    let x = Tensor::ones([4], FLOAT_CPU).set_requires_grad(true);
    timed(|| {
        let y = s.checkpoint().call(&x, |x| {
            let mut h = x.sin();
            for i in 0..2 * CHAIN {
                h = region(format!("r{i}"), Policy::Recompute).call(&h, |h| h * 1.0);
            }
            h
        });
        y.sum(Kind::Float).backward();
    })
}

/// The reference model's blocks under `policy`, each a checkpoint with the
/// switch's settings, forward + backward.
fn model_step(blocks: &[Block], x: &Tensor, policy: ModelPolicy, s: Switch) -> Duration {
    timed(|| {
        let mut h = x.shallow_clone();
        for (i, b) in blocks.iter().enumerate() {
            let p = b.shallow();
            h = s
                .named(format!("layers.{i}"))
                .call(&h, move |x| block_body(&p, &x, policy));
        }
        h.sum(Kind::Float).backward();
    })
}

/// `rounds` runs of `run` off and on, alternating which goes first; the
/// nanoseconds of each, per variant.
fn interleaved(rounds: usize, mut run: impl FnMut(bool) -> Duration) -> (Vec<f64>, Vec<f64>) {
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for which in order {
            let t = run(which).as_secs_f64() * 1e9;
            if which {
                on.push(t);
            } else {
                off.push(t);
            }
        }
    }
    (off, on)
}

fn report(what: &str, per: f64, unit: &str, (off, on): (Vec<f64>, Vec<f64>)) {
    let scale = |v: &[f64]| v.iter().map(|t| t / per).collect::<Vec<_>>();
    let (a, b) = (quartiles(scale(&off)), quartiles(scale(&on)));
    let ratios: Vec<f64> = on.iter().zip(&off).map(|(x, y)| x / y).collect();
    let r = quartiles(ratios);
    let diffs: Vec<f64> = on.iter().zip(&off).map(|(x, y)| (x - y) / per).collect();
    let d = quartiles(diffs);
    println!(
        "| {what} | {:.2} {unit} ({:.2}–{:.2}) | {:.2} {unit} ({:.2}–{:.2}) | {:+.2} {unit} ({:+.2}–{:+.2}) | {:.3} ({:.3}–{:.3}) |",
        a[1], a[0], a[2], b[1], b[0], b[2], d[1], d[0], d[2], r[1], r[0], r[2]
    );
}

fn main() {
    tch::set_num_threads(1);
    tch::manual_seed(0);
    // A smoke test of one round, the small config, unless `cargo bench`.
    let (benching, rounds) = remat_reference::numbers::bench_rounds(31);
    let rng = |on| Switch {
        rng: on,
        path: true,
    };
    let path = |on| Switch {
        rng: true,
        path: on,
    };
    // Warm up the allocator and libtorch's kernels.
    for _ in 0..(if benching { 3 } else { 0 }) {
        checkpoints(rng(true), true);
        save_regions(rng(true));
        recompute_regions(path(true));
    }
    println!("{rounds} interleaved rounds, one intra-op thread; medians (quartiles)\n");
    println!("| what | off | on | on − off | on ÷ off |");
    println!("| --- | --- | --- | --- | --- |");
    let n = CHAIN as f64;
    report(
        "random state, per checkpoint that draws nothing (`sin`)",
        n * 1e3,
        "µs",
        interleaved(rounds, |on| checkpoints(rng(on), false)),
    );
    report(
        "random state, per checkpoint that draws (dropout)",
        n * 1e3,
        "µs",
        interleaved(rounds, |on| checkpoints(rng(on), true)),
    );
    report(
        "random state, per `save` region (nothing drawn)",
        n * 1e3,
        "µs",
        interleaved(rounds, |on| save_regions(rng(on))),
    );
    report(
        "path check, per `recompute` region (saves nothing)",
        2.0 * n * 1e3,
        "µs",
        interleaved(rounds, |on| recompute_regions(path(on))),
    );
    report(
        "path check, per `save` region with its `needs`",
        n * 1e3,
        "µs",
        interleaved(rounds, |on| save_regions(path(on))),
    );

    let cfg = if benching { MEDIUM } else { SMALL };
    let model = Model::new(cfg, 0);
    let x = Tensor::randn([cfg.b, cfg.t, cfg.d], FLOAT_CPU).set_requires_grad(true);
    let model_rounds = if benching { (rounds / 3).max(5) } else { 1 };
    let size = if benching { "medium" } else { "small" };
    for (policy, name) in [
        (ModelPolicy::Full, "full"),
        (ModelPolicy::Selective, "selective"),
        (ModelPolicy::SaveMlp, "save_mlp"),
    ] {
        model_step(&model.blocks, &x, policy, rng(true));
        report(
            &format!("random state, {size} `{name}` step"),
            1e6,
            "ms",
            interleaved(model_rounds, |on| {
                model_step(&model.blocks, &x, policy, rng(on))
            }),
        );
        report(
            &format!("path check (with the metadata check), {size} `{name}` step"),
            1e6,
            "ms",
            interleaved(model_rounds, |on| {
                model_step(&model.blocks, &x, policy, path(on))
            }),
        );
    }
}
