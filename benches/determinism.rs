//! What the replay metadata check (`Determinism::Metadata`, docs/semantics.md
//! rule C13) costs against the default (`Determinism::None`): on a chain of
//! checkpointed regions that each save one tensor (the per-save cost), and
//! on the reference model's medium config with every block checkpointed
//! (`full`), forward + backward. Variants alternate run by run, so a slow
//! stretch of a shared machine hits both; prints medians with the
//! interquartile range and the ratio. `cargo bench --bench determinism`;
//! docs/performance.md records a run and the default it chose.

use remat::{checkpoint, region, Determinism, Policy};
use remat_reference::model::{attention, ln, mlp, Block, Model, MEDIUM, SMALL};
use std::time::{Duration, Instant};
use tch::{kind::FLOAT_CPU, Kind, Tensor};

const REGIONS: usize = 200;

/// Lower quartile, median and upper quartile of `v`.
fn quartiles(mut v: Vec<f64>) -> [f64; 3] {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [at(0.25), at(0.5), at(0.75)]
}

/// A checkpoint of `REGIONS` `recompute` regions of `sin` (one save each).
fn chain(det: Determinism) -> Duration {
    let x = Tensor::ones([4], FLOAT_CPU).set_requires_grad(true);
    let start = Instant::now();
    let y = checkpoint("chain").determinism(det).call(&x, |x| {
        let mut h = x;
        for i in 0..REGIONS {
            h = region(format!("r{i}"), Policy::Recompute).call(&h, |h| h.sin());
        }
        h
    });
    y.sum(Kind::Float).backward();
    start.elapsed()
}

/// The reference model's blocks, each checkpointed, forward + backward.
fn model_step(blocks: &[Block], x: &Tensor, det: Determinism) -> Duration {
    let start = Instant::now();
    let mut h = x.shallow_clone();
    for (i, b) in blocks.iter().enumerate() {
        let p = b.shallow();
        h = checkpoint(format!("layers.{i}"))
            .determinism(det)
            .call(&h, move |x| {
                let d = p.cfg.d;
                let x = &x + attention(&p, &ln(&x, &p.ln1_w, &p.ln1_b, d));
                &x + mlp(&p, &ln(&x, &p.ln2_w, &p.ln2_b, d))
            });
    }
    h.sum(Kind::Float).backward();
    start.elapsed()
}

/// `rounds` runs of `run` under each of `None` and `Metadata`, alternating
/// which goes first; the nanoseconds of each, per variant.
fn interleaved(
    rounds: usize,
    mut run: impl FnMut(Determinism) -> Duration,
) -> (Vec<f64>, Vec<f64>) {
    let (mut none, mut meta) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Determinism::None, Determinism::Metadata]
        } else {
            [Determinism::Metadata, Determinism::None]
        };
        for det in order {
            let t = run(det).as_secs_f64() * 1e9;
            match det {
                Determinism::None => none.push(t),
                _ => meta.push(t),
            }
        }
    }
    (none, meta)
}

fn report(what: &str, unit: f64, label: &str, none: Vec<f64>, meta: Vec<f64>) {
    let (n, m) = (quartiles(none.clone()), quartiles(meta.clone()));
    let ratios: Vec<f64> = meta.iter().zip(&none).map(|(a, b)| a / b).collect();
    let r = quartiles(ratios);
    println!(
        "{what:<40} None {:>9.2} {label} (IQR {:.2}-{:.2})   Metadata {:>9.2} {label} (IQR {:.2}-{:.2})   ratio {:.3} (IQR {:.3}-{:.3})",
        n[1] / unit, n[0] / unit, n[2] / unit, m[1] / unit, m[0] / unit, m[2] / unit, r[1], r[0], r[2]
    );
}

fn main() {
    tch::set_num_threads(1);
    tch::manual_seed(0);
    // A smoke test of one round, the small config, unless `cargo bench`.
    let (benching, rounds) = remat_reference::numbers::bench_rounds(31);
    // Warm up allocator and libtorch's kernels.
    for _ in 0..(if benching { 3 } else { 0 }) {
        chain(Determinism::None);
        chain(Determinism::Metadata);
    }
    let (none, meta) = interleaved(rounds, chain);
    println!("{rounds} interleaved rounds, one intra-op thread");
    let per_save = |v: &[f64]| v.iter().map(|t| t / REGIONS as f64).collect::<Vec<_>>();
    report(
        &format!("chain: {REGIONS} regions of sin, per region"),
        1e3,
        "us",
        per_save(&none),
        per_save(&meta),
    );

    let cfg = if benching { MEDIUM } else { SMALL };
    let model = Model::new(cfg, 0);
    let x = Tensor::randn([cfg.b, cfg.t, cfg.d], FLOAT_CPU).set_requires_grad(true);
    let model_rounds = if benching { (rounds / 3).max(5) } else { 1 };
    model_step(&model.blocks, &x, Determinism::None);
    let (none, meta) = interleaved(model_rounds, |det| model_step(&model.blocks, &x, det));
    report(
        &format!(
            "{} model, full, step ({model_rounds} rounds)",
            if benching { "medium" } else { "small" }
        ),
        1e6,
        "ms",
        none,
        meta,
    );
}
