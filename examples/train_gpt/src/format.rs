//! Time amounts as people read them (bytes print as remat's reports print
//! them, with `remat::diagnostics::human_bytes`, so that the table and the
//! memory reports beside it agree).
//!
//! Invariant: three significant figures.

pub fn human_ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.2} ms")
    }
}
