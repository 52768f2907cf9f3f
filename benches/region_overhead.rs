//! Per-region overhead of the runtime (docs/semantics.md, rule B1): a checkpoint
//! with N regions around a tiny op, against the same ops without regions.
//! Prints medians of repeated runs; run with
//! `cargo bench --bench region_overhead`.

use remat::{checkpoint, recompute_needs_tensor, region, Policy};
use remat_reference::numbers::median;
use std::time::{Duration, Instant};
use tch::{Kind, Tensor};

const REGIONS: usize = 200;
const RUNS: usize = 30;

fn body(x: &Tensor, policy: Option<Policy>) -> Tensor {
    let mut h = x.shallow_clone();
    for i in 0..REGIONS {
        h = match policy {
            None => &h + 1.0,
            Some(p) => {
                let out = region(format!("r{i}"), p).call(&h, |h| h + 1.0);
                if p == Policy::Save {
                    recompute_needs_tensor(&out);
                }
                out
            }
        };
    }
    h
}

fn time(policy: Option<Policy>, backward: bool) -> Duration {
    let runs = (0..RUNS).map(|_| {
        let x = Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
        let start = Instant::now();
        let y = checkpoint("bench").call(&x, move |x| body(&x, policy));
        if backward {
            y.sum(Kind::Float).backward();
        }
        start.elapsed()
    });
    median(runs).expect("RUNS > 0")
}

fn main() {
    tch::set_num_threads(1);
    println!("{REGIONS} regions of `h + 1` on 4 floats, median of {RUNS} runs");
    println!("{:<22} {:>14} {:>16}", "", "forward", "forward+backward");
    let base = (time(None, false), time(None, true));
    println!("{:<22} {:>14?} {:>16?}", "no regions", base.0, base.1);
    for (name, p) in [
        ("Recompute regions", Policy::Recompute),
        ("Save regions", Policy::Save),
    ] {
        let t = (time(Some(p), false), time(Some(p), true));
        let per =
            |a: Duration, b: Duration| (a.as_secs_f64() - b.as_secs_f64()) / REGIONS as f64 * 1e6;
        println!(
            "{name:<22} {:>14?} {:>16?}   per region: {:.2} us forward, {:.2} us forward+backward",
            t.0,
            t.1,
            per(t.0, base.0),
            per(t.1, base.1)
        );
    }
}
