//! Medians, quartiles and per-round ratios: how the bench summarises
//! repeated measurements (each variant once per round, so a ratio taken
//! within one round cancels drift of the machine between rounds).
//!
//! The median is one of the values measured
//! (`remat_reference::numbers::median`).

use remat_reference::numbers::median;

/// Measured values; a failed or missing measurement is not a number.
fn finite(v: &[f64]) -> impl Iterator<Item = f64> + '_ {
    v.iter().copied().filter(|x| x.is_finite())
}

/// The `q`-quantile (0..=1) of `v`, by linear interpolation.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s: Vec<f64> = finite(v).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let pos = q * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// Median and interquartile range.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
}

pub fn summary(v: &[f64]) -> Summary {
    Summary {
        median: median(finite(v)).unwrap_or(f64::NAN),
        q1: quantile(v, 0.25),
        q3: quantile(v, 0.75),
    }
}

/// `a[i] / b[i]` for each round.
pub fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}
