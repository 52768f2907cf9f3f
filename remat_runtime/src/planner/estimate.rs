//! `Estimate`: a time the profiler measured several times, as a middle
//! value and a spread, so that a plan can say how sure its prediction is.
//!
//! Invariant: an estimate is never negative (a cost cannot save time; a
//! difference of two noisy step times that comes out below zero is
//! reported as 0 with the spread that makes it consistent with its
//! samples), and its spread is never smaller than half the samples'
//! interquartile range.

/// A measured cost in nanoseconds: the median of its samples and its
/// spread, half their interquartile range (linear interpolation between
/// samples). A sample's worth of noise moves the median by less than the
/// spread, which is why the planner treats plans whose predicted times
/// differ by less than their spreads as equally fast (docs/planner.md,
/// "Equivalent plans").
///
/// When the median is negative (a difference of step times that noise
/// pushed below zero), the estimate is 0 and the spread is widened to
/// reach the median, so that the interval `ns ± spread_ns` still holds
/// what was measured.
///
/// ```
/// use remat_runtime::planner::Estimate;
/// let e = Estimate::from_samples(&[10, 12, 11, 30, 9]);
/// assert_eq!(e.ns, 11);
/// assert_eq!(e.spread_ns, 1); // quartiles 10 and 12
/// let noisy = Estimate::from_samples(&[-4, 2, -1]);
/// assert_eq!((noisy.ns, noisy.spread_ns), (0, 2)); // median -1, half IQR 1.5
/// assert_eq!(Estimate::from_samples(&[]), Estimate::default());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Estimate {
    /// The median of the samples, at least 0.
    pub ns: u64,
    /// Half the interquartile range of the samples (widened to cover a
    /// negative median clamped to 0).
    pub spread_ns: u64,
}

impl Estimate {
    /// The estimate of `samples` (ns; negative values are allowed, as
    /// differences of step times).
    pub fn from_samples(samples: &[i64]) -> Estimate {
        let Some(mid) = median(samples.iter().copied()) else {
            return Estimate::default();
        };
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let half_iqr = ((quartile(&sorted, 3) - quartile(&sorted, 1)) / 2.0).ceil() as u64;
        Estimate {
            ns: mid.max(0) as u64,
            spread_ns: half_iqr.max(mid.min(0).unsigned_abs()),
        }
    }

    /// The same median with a spread of at least `share` of it: for an
    /// estimate whose samples agree more closely than what it estimates
    /// is known.
    ///
    /// ```
    /// use remat_runtime::planner::Estimate;
    /// let e = Estimate { ns: 1000, spread_ns: 20 };
    /// assert_eq!(e.widened(0.1).spread_ns, 100);
    /// assert_eq!(e.widened(0.01).spread_ns, 20);
    /// ```
    pub fn widened(self, share: f64) -> Estimate {
        let floor = (self.ns as f64 * share).ceil() as u64;
        Estimate {
            ns: self.ns,
            spread_ns: self.spread_ns.max(floor),
        }
    }

    /// An exact value (spread 0).
    ///
    /// ```
    /// assert_eq!(remat_runtime::planner::Estimate::exact(5).spread_ns, 0);
    /// ```
    pub fn exact(ns: u64) -> Estimate {
        Estimate { ns, spread_ns: 0 }
    }
}

impl std::ops::Add for Estimate {
    type Output = Estimate;

    /// Medians add; spreads add too (the worst case: the errors of the
    /// estimates of one kind are the same error wherever they enter).
    fn add(self, other: Estimate) -> Estimate {
        Estimate {
            ns: self.ns + other.ns,
            spread_ns: self.spread_ns + other.spread_ns,
        }
    }
}

impl std::fmt::Display for Estimate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.3} ± {:.3} ms",
            self.ns as f64 / 1e6,
            self.spread_ns as f64 / 1e6
        )
    }
}

/// The `q`-th quartile (1 or 3) of sorted values, interpolated.
fn quartile(sorted: &[i64], q: usize) -> f64 {
    let pos = (sorted.len() - 1) as f64 * q as f64 / 4.0;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] as f64 + (sorted[hi] - sorted[lo]) as f64 * (pos - lo as f64)
}

/// The median of integer samples: the middle one in order, the upper of
/// the two middle ones for an even count, never an average of two, so an
/// estimate is always a time that was measured.
pub(super) fn median<T: Ord + Copy>(values: impl IntoIterator<Item = T>) -> Option<T> {
    let mut v: Vec<T> = values.into_iter().collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}
