//! The memory-budget planner on the reference model (docs/planner.md).
//!
//! ```text
//! cargo run --release --example plan -- [--config small|medium] [--budget 60MiB]
//!     [--peak] [--steps 5] [--out plan.json] [--sweep]
//! ```
//!
//! Profiles one forward, prints the profile and the plan for the budget
//! (default: halfway between the least and `none`'s bytes), writes the plan
//! file, trains a few steps under it and prints predicted against measured
//! bytes and the step time. `--sweep` instead measures the step time of the
//! hand policies and of plans at their bytes (and, on the small config, of
//! every assignment the planner considers): the numbers of
//! docs/performance.md.

use remat::planner::{self, assignments, measure_kept_bytes, parse_bytes, Plan};
use remat_reference::model::{batch, Config, Model, ModelPolicy, MEDIUM, POLICIES, SMALL};
use std::time::Instant;
use tch::nn::OptimizerConfig;

struct Args {
    cfg: Config,
    budget: Option<i64>,
    peak: bool,
    steps: usize,
    out: String,
    sweep: bool,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        cfg: SMALL,
        budget: None,
        peak: false,
        steps: 5,
        out: "plan.json".into(),
        sweep: false,
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
            "--budget" => a.budget = Some(parse_bytes(&value()?).map_err(|e| e.to_string())?),
            "--peak" => a.peak = true,
            "--steps" => a.steps = value()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--out" => a.out = value()?,
            "--sweep" => a.sweep = true,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(a)
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Median wall time of `reps` forward+backward steps, in ms (gradients
/// are zeroed, not applied).
fn step_ms(model: &Model, reps: usize, mut step: impl FnMut() -> tch::Tensor) -> f64 {
    let mut times: Vec<f64> = (0..reps + 1)
        .map(|_| {
            model.zero_grad();
            let start = Instant::now();
            step().backward();
            start.elapsed().as_secs_f64() * 1e3
        })
        .skip(1) // warm-up
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = args()?;
    let model = Model::new(a.cfg, 0);
    let (tokens, targets) = batch(a.cfg, 1);
    let loss = |policy| model.loss(&tokens, &targets, policy);
    let profile = planner::profile(|| loss(ModelPolicy::Auto))?;
    println!("{profile}");
    if a.sweep {
        return sweep(&a, &model, &profile, &loss);
    }

    let none = measure_kept_bytes(|| loss(ModelPolicy::None)).1;
    let least = Plan::minimum(&profile).predicted.kept_bytes;
    let budget = a.budget.unwrap_or(least + (none - least) / 2);
    let plan = if a.peak {
        Plan::for_peak_budget(&profile, budget)?
    } else {
        Plan::for_budget(&profile, budget)?
    };
    println!("{plan}");
    plan.save(&a.out)?;
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

/// Measured step times of the hand policies, of plans at their bytes, and
/// (small config) of every assignment, for docs/performance.md.
fn sweep(
    a: &Args,
    model: &Model,
    profile: &planner::Profile,
    loss: &dyn Fn(ModelPolicy) -> tch::Tensor,
) -> Result<(), Box<dyn std::error::Error>> {
    let reps = 5;
    println!("hand policies against the plan at their bytes ({reps} steps each, median):");
    for policy in POLICIES {
        let bytes = measure_kept_bytes(|| loss(policy)).1;
        let hand = step_ms(model, reps, || loss(policy));
        let plan = Plan::for_budget(profile, bytes)?;
        let planned = step_ms(model, reps, || plan.scope(|| loss(ModelPolicy::Auto)));
        println!(
            "  {policy:<10?} {:>9.3} MiB  hand {hand:>8.1} ms  plan {planned:>8.1} ms \
             (plan keeps {:.3} MiB)",
            mib(bytes),
            mib(plan.predicted.kept_bytes)
        );
    }
    if a.cfg != SMALL {
        return Ok(());
    }
    let all = assignments(profile);
    println!("every assignment ({}), measured:", all.len());
    let measured: Vec<(i64, f64)> = all
        .iter()
        .map(|c| {
            let plan = Plan::from_choices(profile, c).expect("a valid assignment");
            let ms = step_ms(model, reps, || plan.scope(|| loss(ModelPolicy::Auto)));
            (plan.predicted.kept_bytes, ms)
        })
        .collect();
    let mut budgets: Vec<i64> = measured.iter().map(|m| m.0).collect();
    budgets.sort_unstable();
    budgets.dedup();
    for budget in budgets {
        let plan = Plan::for_budget(profile, budget)?;
        let planned = step_ms(model, reps, || plan.scope(|| loss(ModelPolicy::Auto)));
        let best = measured
            .iter()
            .filter(|m| m.0 <= budget)
            .map(|m| m.1)
            .fold(f64::INFINITY, f64::min);
        println!(
            "  budget {:>9.3} MiB: plan {planned:>7.2} ms, best measured {best:>7.2} ms ({:+.1}%)",
            mib(budget),
            (planned / best - 1.0) * 100.0
        );
    }
    Ok(())
}
