//! The peak during backward against the planner's prediction, on the
//! reference model (docs/planner.md, "Peak during backward").
//!
//! ```text
//! cargo run --release --example peak -- [small|medium]
//! ```
//!
//! For a sweep of kept budgets and of peak budgets from the least to
//! `none`'s, plans the model, runs one step under each plan and prints the
//! predicted kept and peak bytes against what glibc's heap shows: the
//! growth over the forward, and the most during backward at every node
//! boundary (`diagnostics::backward_heap_peak`). Independent of remat's
//! records, so it shows where the planner's model of the peak is off.

use remat::diagnostics::{backward_heap_peak, heap_bytes_in_use};
use remat::planner::{self, measure_kept_bytes, Plan};
use remat_reference::model::{Config, ModelPolicy, Setup, MEDIUM, SMALL};

/// Heap bytes over the bytes in use before the forward: right after the
/// forward, and the most during backward.
fn measure(s: &Setup, run: impl Fn() -> tch::Tensor) -> Option<(i64, i64)> {
    s.model.zero_grad();
    let before = heap_bytes_in_use()? as i64;
    let loss = run();
    let after = heap_bytes_in_use()? as i64;
    let peak = backward_heap_peak(&loss).ok()?? as i64;
    Some((after - before, peak - before))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tch::set_num_threads(1);
    let cfg: Config = match std::env::args().nth(1).as_deref() {
        None | Some("small") => SMALL,
        Some("medium") => MEDIUM,
        Some(other) => return Err(format!("unknown config `{other}`; give small or medium").into()),
    };
    let s = Setup::new(cfg);
    let profile = planner::profile_with(|| s.loss(ModelPolicy::Auto), 1)?;
    // Gradients exist before any measurement: zero_grad keeps them.
    s.loss(ModelPolicy::None).backward();
    let most = measure_kept_bytes(|| s.loss(ModelPolicy::None)).1;
    let Some((none_forward, none_peak)) = measure(&s, || s.loss(ModelPolicy::None)) else {
        return Err("the C heap does not report its bytes here (not glibc)".into());
    };
    println!("none: kept {most}, heap after the forward +{none_forward}, peak +{none_peak}");
    println!(
        "{:<6} {:>12} {:>12} {:>14} {:>12} {:>12} {:>12}",
        "target", "budget", "kept pred", "heap after fwd", "peak pred", "peak heap", "heap - pred"
    );
    let least_kept = Plan::minimum(&profile).predicted.kept_bytes;
    let least_peak = Plan::minimum(&profile).predicted.peak_bytes;
    for peak_target in [false, true] {
        for step in 0..=8 {
            let plan = if peak_target {
                let budget = least_peak + (most - least_peak) * step / 8;
                match Plan::for_peak_budget(&profile, budget) {
                    Ok(plan) => plan,
                    Err(_) => continue,
                }
            } else {
                Plan::for_budget(&profile, least_kept + (most - least_kept) * step / 8)?
            };
            let (forward, peak) = measure(&s, || plan.scope(|| s.loss(ModelPolicy::Auto)))
                .ok_or("the heap stopped reporting")?;
            println!(
                "{:<6} {:>12} {:>12} {:>14} {:>12} {:>12} {:>12}",
                if peak_target { "peak" } else { "kept" },
                plan.budget.unwrap_or(0),
                plan.predicted.kept_bytes,
                forward,
                plan.predicted.peak_bytes,
                peak,
                peak - plan.predicted.peak_bytes,
            );
        }
    }
    Ok(())
}
