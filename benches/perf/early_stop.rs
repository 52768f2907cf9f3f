//! `perf early-stop <small|medium> <rounds>`: what early stop saves, the
//! same checkpointed step with it on and off, interleaved (each round runs
//! every variant once, in an order that rotates), as medians, interquartile
//! ranges and per-round ratios (docs/performance.md, "Early stop").

use crate::config_by_name;
use crate::rust_side::{policy_name, step};
use crate::stats::{ratios, summary};
use remat::Checkpoint;
use remat_reference::model::{ModelPolicy, Setup};

const MEASURED: [ModelPolicy; 3] = [
    ModelPolicy::Full,
    ModelPolicy::Selective,
    ModelPolicy::SaveMlp,
];

pub fn early_stop(args: &[String]) -> Result<(), String> {
    let usage = "early-stop <small|medium> <rounds>";
    let [config, rounds] = args else {
        return Err(usage.into());
    };
    let rounds: usize = rounds.parse().map_err(|_| usage)?;
    let cfg = config_by_name(config).ok_or(usage)?;
    let setup = Setup::on(cfg, crate::device());
    let mut variants: Vec<(ModelPolicy, bool)> = MEASURED
        .iter()
        .flat_map(|&p| [(p, true), (p, false)])
        .collect();
    let mut times = vec![Vec::new(); variants.len()];
    // Round 0 warms every variant up, untimed.
    for round in 0..=rounds {
        variants.rotate_left(1);
        for &(p, on) in &variants {
            Checkpoint::set_default_early_stop(on);
            let (secs, _) = step(&setup, p);
            if round > 0 {
                let i =
                    MEASURED.iter().position(|&m| m == p).expect("measured") * 2 + usize::from(!on);
                times[i].push(secs);
            }
        }
    }
    Checkpoint::set_default_early_stop(false);
    println!(
        "early stop, {config}, {} thread(s), {rounds} rounds: step ms, median (IQR)\n",
        crate::threads()
    );
    println!("| policy | on | off | on / off, per round |");
    println!("| --- | --- | --- | --- |");
    for (k, p) in MEASURED.iter().enumerate() {
        let (on, off) = (&times[2 * k], &times[2 * k + 1]);
        let ms = |v: &[f64]| {
            let s = summary(v);
            format!(
                "{:.1} ({:.1}-{:.1})",
                s.median * 1e3,
                s.q1 * 1e3,
                s.q3 * 1e3
            )
        };
        let r = summary(&ratios(on, off));
        println!(
            "| {} | {} | {} | {:.3} ({:.3}-{:.3}) |",
            policy_name(*p),
            ms(on),
            ms(off),
            r.median,
            r.q1,
            r.q3
        );
    }
    Ok(())
}
