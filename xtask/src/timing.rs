//! How long each part of `cargo xtask test` took, printed as it ends and
//! once more as a table at the end, so that a CI log shows where the
//! 30-minute budget goes (docs/testing.md, "How long the suite takes").

use std::cell::RefCell;
use std::time::Instant;

thread_local! {
    static DONE: RefCell<Vec<(String, f64)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` as the part `what`, recording its wall time (also on failure,
/// which is when the table helps most).
pub fn part<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let secs = start.elapsed().as_secs_f64();
    eprintln!("xtask test: {what}: {secs:.0} s");
    DONE.with(|done| done.borrow_mut().push((what.to_string(), secs)));
    out
}

/// The parts run so far, longest first, with the total.
pub fn print_table() {
    DONE.with(|done| {
        let mut parts = done.borrow().clone();
        let total: f64 = parts.iter().map(|(_, s)| s).sum();
        parts.sort_by(|a, b| b.1.total_cmp(&a.1));
        eprintln!(
            "xtask test: wall time per part (total {:.1} min):",
            total / 60.0
        );
        for (what, secs) in parts {
            eprintln!("  {secs:>6.0} s  {what}");
        }
    });
}
