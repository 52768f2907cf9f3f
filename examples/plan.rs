//! The memory-budget planner on the reference model (docs/planner.md).
//!
//! ```text
//! cargo run --release --example plan -- [--config small|medium] [--budget 60MiB]
//!     [--peak] [--steps 5] [--out plan.json]
//! ```
//!
//! Profiles one forward, prints the profile and the plan for the budget
//! (default: halfway between the least and `none`'s bytes), writes the plan
//! file, trains a few steps under it and prints predicted against measured
//! bytes and the step time. The measured comparison with the hand policies
//! and with every assignment, and the Pareto plot, are section 4 of
//! `cargo xtask bench` (docs/performance.md).

use remat::planner::{self, measure_kept_bytes, Plan};
use remat_reference::model::{batch, Config, Model, ModelPolicy, MEDIUM, SMALL};
use remat_reference::numbers::parse_bytes;
use std::time::Instant;
use tch::nn::OptimizerConfig;

struct Args {
    cfg: Config,
    budget: Option<i64>,
    peak: bool,
    steps: usize,
    out: String,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        cfg: SMALL,
        budget: None,
        peak: false,
        steps: 5,
        out: "plan.json".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--config" => {
                a.cfg = match value()?.as_str() {
                    "small" => SMALL,
                    "medium" => MEDIUM,
                    other => return Err(format!("unknown config `{other}` (small, medium)")),
                }
            }
            "--budget" => a.budget = Some(parse_bytes(&value()?)?),
            "--peak" => a.peak = true,
            "--steps" => a.steps = value()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--out" => a.out = value()?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(a)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = args()?;
    // One intra-op thread: step times on a shared machine are otherwise noise.
    tch::set_num_threads(1);
    let model = Model::new(a.cfg, 0);
    let (tokens, targets) = batch(a.cfg, 1);
    let loss = |policy| model.loss(&tokens, &targets, policy);
    let profile = planner::profile(|| loss(ModelPolicy::Auto))?;
    println!("{profile}");

    let none = measure_kept_bytes(|| loss(ModelPolicy::None)).1;
    let least = Plan::minimum(&profile).predicted.kept_bytes;
    let budget = a.budget.unwrap_or(least + (none - least) / 2);
    let plan = if a.peak {
        Plan::for_peak_budget(&profile, budget)?
    } else {
        Plan::for_budget(&profile, budget)?
    };
    println!("{plan}");
    plan.save_file(&a.out)?;
    println!("plan written to {}", a.out);

    let mut opt = tch::nn::Sgd::default().build(&model.vs, 1e-2)?;
    for step in 0..a.steps {
        let start = Instant::now();
        let (l, kept) = plan.scope(|| measure_kept_bytes(|| loss(ModelPolicy::Auto)));
        opt.zero_grad();
        l.backward();
        opt.step();
        println!(
            "step {step}: loss {:.4}, kept {kept} B measured vs {} B predicted ({}), {:.1} ms",
            l.double_value(&[]),
            plan.predicted.kept_bytes,
            if kept == plan.predicted.kept_bytes {
                "equal"
            } else {
                "DIFFERENT"
            },
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
