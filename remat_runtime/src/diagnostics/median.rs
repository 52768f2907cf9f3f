//! The median of repeated measurements: what the planner takes of its
//! profiling runs, and what the benches and the training example report.
//!
//! Invariant: the median is one of the values given (the upper middle one
//! for an even count), never an average of two, so it works the same for
//! nanoseconds, durations and seconds.

use std::cmp::Ordering;

/// The median of `values`: the middle one in order, for an even count the
/// upper of the two middle ones. Values not comparable with themselves
/// (NaN) are left out; `None` when nothing is left.
///
/// ```
/// use remat_runtime::diagnostics::median;
/// use std::time::Duration;
/// assert_eq!(median([3u64, 1, 2]), Some(2));
/// assert_eq!(median([4, 1, 3, 2]), Some(3));
/// assert_eq!(median([1.5, f64::NAN, 0.5, 2.5]), Some(1.5));
/// assert_eq!(median(Vec::<Duration>::new()), None);
/// ```
pub fn median<T: PartialOrd>(values: impl IntoIterator<Item = T>) -> Option<T> {
    let mut v: Vec<T> = values
        .into_iter()
        .filter(|x| x.partial_cmp(x).is_some())
        .collect();
    // Total once the incomparable values are gone.
    v.sort_unstable_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
    let middle = v.len() / 2;
    (!v.is_empty()).then(|| v.swap_remove(middle))
}
