//! `peak`: the planner's peak contract (docs/planner.md, "The peak
//! contract") measured over the model shapes the tests hold to it
//! (tests/planner/contract.rs) and the deep config, written into
//! docs/planner.md between its markers: a summary per model and the medium
//! model's whole sweep.

use remat::planner::{peak_tolerance, Target};
use remat_reference::model::{Config, DEEP, MEDIUM, SMALL};
use remat_reference::peak_contract::{sweep, table, Row, Sweep};
use remat_reference::planned::mixed::Mixed;
use remat_reference::planned::transformer::{Llama, LLAMA};
use remat_reference::planned::unet::UNet;
use remat_reference::planned::{Planned, Reference};
use std::fmt::Write;
use std::path::Path;

/// Where the section starts and ends in docs/planner.md.
const BEGIN: &str = "<!-- peak contract: written by `cargo xtask bench` -->";
const END: &str = "<!-- end of the peak contract -->";

/// The models, the deep config last (minutes; left out of a quick run).
fn models(quick: bool) -> Vec<Box<dyn Planned>> {
    let mut out: Vec<Box<dyn Planned>> = vec![
        Box::new(Reference::new("small", SMALL)),
        Box::new(Reference::new("medium", MEDIUM)),
        Box::new(Reference::new("deep-narrow", Config { l: 32, ..SMALL })),
        Box::new(Llama::new(LLAMA)),
        Box::new(UNet::new()),
        Box::new(Mixed::new()),
    ];
    if !quick {
        out.push(Box::new(Reference::new("deep", DEEP)));
    }
    out
}

fn mib(b: i64) -> String {
    format!("{:.2}", b as f64 / (1 << 20) as f64)
}

/// One summary line: the sweep's size, its worst error against the
/// tolerance, how far a measured peak came to its peak budget, and whether
/// the predicted replay fell as the budget rose.
fn summary(o: &mut String, s: &Sweep) {
    let rows = &s.rows;
    let worst = rows
        .iter()
        .max_by_key(|r| r.error().abs())
        .expect("a sweep has rows");
    let share = |r: &Row| r.error().abs() as f64 / r.predicted as f64 * 100.0;
    let worst_share = rows.iter().map(share).fold(0.0, f64::max);
    let within = rows
        .iter()
        .all(|r| r.error().abs() <= peak_tolerance(r.predicted));
    let closest = rows
        .iter()
        .filter(|r| r.target == Target::Peak)
        .map(|r| r.measured - r.budget)
        .max()
        .unwrap_or(0);
    let monotone = [Target::Kept, Target::Peak].iter().all(|&t| {
        let times: Vec<u64> = rows
            .iter()
            .filter(|r| r.target == t)
            .map(|r| r.replay_ns)
            .collect();
        times.windows(2).all(|w| w[1] <= w[0])
    });
    let (least, most) = (
        rows.iter().map(|r| r.predicted).min().unwrap_or(0),
        rows.iter().map(|r| r.predicted).max().unwrap_or(0),
    );
    let _ = writeln!(
        o,
        "| {} | {} | {} | {} | {}–{} | {:+.1} ({:.2}%) | {} | {:+.1} | {} |",
        worst.model,
        s.profile.layers.len(),
        s.profile.kinds.len(),
        rows.len(),
        mib(least),
        mib(most),
        worst.error() as f64 / 1024.0,
        worst_share,
        if within { "yes" } else { "**no**" },
        closest as f64 / 1024.0,
        if monotone { "yes" } else { "**no**" },
    );
}

/// The section's markdown.
fn render(sweeps: &[Sweep], command: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{BEGIN}\n\nMeasured by `{command}` on this machine (one thread, glibc's heap at \
         every node boundary of each plan's backward, over the bytes in use before its \
         forward, parameters' gradients allocated); 9 kept and 9 peak budgets per model, \
         evenly from the least any plan needs to what the model keeps with no checkpoint. \
         Tolerance: 64 KiB + 3% of the predicted peak (`planner::peak_tolerance`).\n"
    );
    o.push_str(
        "| model | planned checkpoints | kinds | plans | predicted peaks MiB | worst measured − \
         predicted KiB | within tolerance | most measured − peak budget KiB | replay falls as \
         the budget rises |\n|---|--:|--:|--:|--:|--:|:-:|--:|:-:|\n",
    );
    for s in sweeps {
        summary(&mut o, s);
    }
    if let Some(medium) = sweeps.iter().find(|s| s.rows[0].model == "medium") {
        o.push_str("\nThe medium model's sweep, plan by plan:\n\n");
        o.push_str(&table(&medium.rows));
    }
    let _ = write!(o, "\n{END}");
    o
}

/// Measures every model and writes the section into `docs` (a
/// docs/planner.md holding both markers).
pub fn write_section(docs: &Path, quick: bool, command: &str) -> Result<(), String> {
    let read = || {
        std::fs::read_to_string(docs).map_err(|e| format!("cannot read {}: {e}", docs.display()))
    };
    let markers = |text: &str| match (text.find(BEGIN), text.find(END)) {
        (Some(start), Some(end)) if start < end => Ok((start, end)),
        _ => Err(format!(
            "{} has no peak contract markers ({BEGIN} ... {END})",
            docs.display()
        )),
    };
    // Checked before the minutes of measuring; read again after them.
    markers(&read()?)?;
    let mut sweeps = Vec::new();
    for model in models(quick) {
        eprintln!("bench: peak contract: {}", model.name());
        let s = sweep(model.as_ref(), 8)?
            .ok_or("the C heap does not report its bytes here (not glibc)")?;
        sweeps.push(s);
    }
    let text = read()?;
    let (start, end) = markers(&text)?;
    let out = format!(
        "{}{}{}",
        &text[..start],
        render(&sweeps, command),
        &text[end + END.len()..]
    );
    std::fs::write(docs, out).map_err(|e| format!("cannot write {}: {e}", docs.display()))
}

/// `peak [--quick] --docs FILE`.
pub fn peak(args: &[String]) -> Result<(), String> {
    let quick = args.iter().any(|a| a == "--quick");
    let docs = args
        .iter()
        .skip_while(|a| *a != "--docs")
        .nth(1)
        .ok_or("peak needs --docs FILE (docs/planner.md)")?;
    let command = if quick {
        "cargo xtask bench --peak --quick"
    } else {
        "cargo xtask bench --peak"
    };
    write_section(Path::new(docs), quick, command)
}
