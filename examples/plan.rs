//! The memory-budget planner on the reference model (docs/planner.md).
//!
//! ```text
//! cargo run --release --example plan -- [--config small|medium] [--budget 60MiB]
//!     [--peak] [--steps 5] [--out plan.json] [--sweep [--svg pareto.svg]]
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
    svg: Option<String>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        cfg: SMALL,
        budget: None,
        peak: false,
        steps: 5,
        out: "plan.json".into(),
        sweep: false,
        svg: None,
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
            "--svg" => a.svg = Some(value()?),
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
    // One intra-op thread: step times on a shared machine are otherwise noise.
    tch::set_num_threads(1);
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
    let mut hand_points = Vec::new();
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
        hand_points.push((format!("{policy:?}"), bytes, hand));
    }
    let least = Plan::minimum(profile).predicted.kept_bytes;
    let most = hand_points[0].1; // `None`
    println!("plans from the least to `None`'s bytes:");
    let mut frontier = Vec::new();
    for i in 0..=10 {
        let budget = least + (most - least) * i / 10;
        let plan = Plan::for_budget(profile, budget)?;
        let ms = step_ms(model, reps, || plan.scope(|| loss(ModelPolicy::Auto)));
        println!(
            "  budget {:>9.3} MiB: keeps {:>9.3} MiB, {ms:>8.1} ms (replay predicted {:.1} ms)",
            mib(budget),
            mib(plan.predicted.kept_bytes),
            plan.predicted.replay_ns as f64 / 1e6
        );
        frontier.push((plan.predicted.kept_bytes, ms));
    }
    if let Some(path) = &a.svg {
        std::fs::write(path, pareto_svg(&frontier, &hand_points))?;
        println!("Pareto plot written to {path}");
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

/// Step time against bytes kept: the plans as a line, the hand policies as
/// labelled points (plain SVG, no plotting dependency).
fn pareto_svg(frontier: &[(i64, f64)], hand: &[(String, i64, f64)]) -> String {
    let (w, h, m) = (640.0, 420.0, 60.0);
    let xs = frontier
        .iter()
        .map(|p| mib(p.0))
        .chain(hand.iter().map(|p| mib(p.1)));
    let ys = frontier.iter().map(|p| p.1).chain(hand.iter().map(|p| p.2));
    let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (y0, y1) = ys.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
    let (y0, y1) = (y0 * 0.95, y1 * 1.05);
    let sx = |x: f64| m + (x - x0) / (x1 - x0).max(1e-9) * (w - 2.0 * m);
    let sy = |y: f64| h - m - (y - y0) / (y1 - y0).max(1e-9) * (h - 2.0 * m);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <line x1=\"{m}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <line x1=\"{m}\" y1=\"{m}\" x2=\"{m}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <text x=\"{cx}\" y=\"{lb}\" text-anchor=\"middle\">bytes kept (MiB)</text>\n\
         <text x=\"15\" y=\"{cy}\" transform=\"rotate(-90 15 {cy})\" \
         text-anchor=\"middle\">step time (ms)</text>\n",
        b = h - m,
        r = w - m,
        cx = w / 2.0,
        lb = h - 20.0,
        cy = h / 2.0,
    );
    for i in 0..=4 {
        let x = x0 + (x1 - x0) * i as f64 / 4.0;
        let y = y0 + (y1 - y0) * i as f64 / 4.0;
        svg += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{x:.1}</text>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{y:.0}</text>\n",
            sx(x),
            h - m + 16.0,
            m - 6.0,
            sy(y) + 4.0
        );
    }
    let mut sorted = frontier.to_vec();
    sorted.sort_by_key(|p| p.0);
    let points: Vec<String> = sorted
        .iter()
        .map(|p| format!("{:.1},{:.1}", sx(mib(p.0)), sy(p.1)))
        .collect();
    svg += &format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"steelblue\" stroke-width=\"2\"/>\n",
        points.join(" ")
    );
    for p in &sorted {
        svg += &format!(
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"steelblue\"/>\n",
            sx(mib(p.0)),
            sy(p.1)
        );
    }
    for (name, bytes, ms) in hand {
        let (x, y) = (sx(mib(*bytes)), sy(*ms));
        svg += &format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"8\" fill=\"crimson\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\">{name}</text>\n",
            x - 4.0,
            y - 4.0,
            x + 7.0,
            y - 7.0
        );
    }
    svg += &format!(
        "<text x=\"{r}\" y=\"{t}\" text-anchor=\"end\" fill=\"steelblue\">plan (line)</text>\n\
         <text x=\"{r}\" y=\"{t2}\" text-anchor=\"end\" fill=\"crimson\">hand policies</text>\n</svg>\n",
        r = w - m,
        t = m - 20.0,
        t2 = m - 6.0
    );
    svg
}
