//! `extras <rounds> <reps>`: where a hand policy's extra step time over
//! `none` goes, on the medium config. One profile, then rounds of the hand
//! policies (rotated, each round's value the step with the least time of
//! `reps`), and per policy: the time model's predicted replay, the
//! measured extra over `none` of the whole step and of its forward alone,
//! and the minor page faults of the backward. Like every timed subcommand
//! it runs with glibc's allocator pinned (`allocator`), where the backward
//! takes no faults; run it with `REMAT_BENCH_PINNED=1` to see the steps
//! with the environment's own settings (docs/performance.md, section 6).

use crate::accuracy::hand_choices;
use crate::report::ms_with;
use crate::rust_side::policy_name;
use crate::stats::{summary, Summary};
use remat::planner;
use remat_reference::model::{ModelPolicy, Setup, MEDIUM, POLICIES};
use std::time::Instant;

/// Minor page faults of this process so far.
fn minor_faults() -> Result<f64, String> {
    crate::rust_side::minor_faults()
        .map(|f| f as f64)
        .ok_or_else(|| "no minor fault count in /proc/self/stat".to_string())
}

/// One step: (seconds, forward seconds, backward minor faults).
fn step(setup: &Setup, policy: ModelPolicy) -> Result<(f64, f64, f64), String> {
    setup.model.zero_grad();
    let device = setup.model.device();
    remat::diagnostics::device::synchronize(device);
    let start = Instant::now();
    let loss = setup.loss(policy);
    remat::diagnostics::device::synchronize(device);
    let forward = start.elapsed().as_secs_f64();
    let faults = minor_faults()?;
    loss.backward();
    remat::diagnostics::device::synchronize(device);
    Ok((
        start.elapsed().as_secs_f64(),
        forward,
        minor_faults()? - faults,
    ))
}

pub fn extras(args: &[String]) -> Result<(), String> {
    let usage = "extras <rounds> <reps>";
    let [rounds, reps] = args else {
        return Err(usage.into());
    };
    let rounds: usize = rounds.parse().map_err(|_| usage)?;
    let reps: usize = reps.parse().map_err(|_| usage)?;
    let setup = Setup::on(MEDIUM, crate::device());
    let profile =
        planner::profile_with(|| setup.loss(ModelPolicy::Auto), 15).map_err(|e| e.to_string())?;
    let n = POLICIES.len();
    // Per policy and round: (step, forward, backward faults) of its fastest step.
    let mut runs: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); n];
    for round in 0..=rounds {
        for k in 0..n {
            let i = (k + round) % n;
            let mut best = (f64::INFINITY, 0.0, 0.0);
            for _ in 0..reps.max(1) {
                let s = step(&setup, POLICIES[i])?;
                if s.0 < best.0 {
                    best = s;
                }
            }
            // The first round warms up.
            if round > 0 {
                runs[i].push(best);
            }
        }
        eprintln!("bench: extras, round {round}/{rounds}");
    }
    let none = POLICIES
        .iter()
        .position(|p| *p == ModelPolicy::None)
        .ok_or("no `none` policy")?;
    let over = |i: usize, f: fn(&(f64, f64, f64)) -> f64| -> Summary {
        let d: Vec<f64> = runs[i]
            .iter()
            .zip(&runs[none])
            .map(|(a, b)| f(a) - f(b))
            .collect();
        summary(&d)
    };
    println!("{rounds} rounds, each the fastest of {reps} steps; medians (interquartile range)\n");
    println!("| policy | predicted replay | step | extra over `none` | forward's extra | backward's minor faults | measured ÷ predicted |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (i, &p) in POLICIES.iter().enumerate() {
        let predicted = hand_choices(&profile, p)
            .map(|c| planner::predict(&profile, &c).replay_ns as f64 / 1e9)
            .unwrap_or(f64::NAN);
        let extra = over(i, |r| r.0);
        let faults: Vec<f64> = runs[i].iter().map(|r| r.2).collect();
        println!(
            "| `{}` | {:.1} ms | {} | {} | {} | {:.0} | {:.2} |",
            policy_name(p),
            predicted * 1e3,
            ms_with(summary(&runs[i].iter().map(|r| r.0).collect::<Vec<_>>()), 1),
            ms_with(extra, 1),
            ms_with(over(i, |r| r.1), 1),
            summary(&faults).median,
            if predicted > 0.0 {
                extra.median / predicted
            } else {
                f64::NAN
            },
        );
    }
    println!("\n```text\n{profile}```");
    Ok(())
}
