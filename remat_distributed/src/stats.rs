//! What the last backward did to the Reducer, as the bridge's hooks saw
//! it (docs/semantics.md, rule W9): how often each parameter reported its
//! gradient, when each bucket's all-reduce was launched and completed, and
//! how far communication had got when watched tensors' gradients were
//! computed.

use std::time::Duration;

/// One bucket's all-reduce, as c10d ran it: launched by the Reducer the
/// moment the bucket was full, completed when Gloo finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketLaunch {
    /// When it was launched, since the `DistributedDataParallel` was made.
    pub launched: Duration,
    /// When it completed; `None` if it had not yet.
    pub completed: Option<Duration>,
}

/// The record of one backward, from the forward that prepared it up to
/// the moment it is read ([`DistributedDataParallel::last_backward`]).
///
/// [`DistributedDataParallel::last_backward`]: crate::DistributedDataParallel::last_backward
///
/// ```
/// use remat_distributed::{BackwardStats, BucketLaunch};
/// use std::time::Duration;
/// let ms = Duration::from_millis;
/// let stats = BackwardStats {
///     reports: vec![1, 1],
///     launches: vec![
///         BucketLaunch { launched: ms(0), completed: Some(ms(3)) },
///         BucketLaunch { launched: ms(2), completed: Some(ms(5)) },
///     ],
///     watched: vec![1],
/// };
/// assert_eq!(stats.communication(), ms(5)); // overlapping intervals count once
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackwardStats {
    /// Per parameter, in the order given: how many times its
    /// `AccumulateGrad` node ran, each run being one report to the Reducer.
    pub reports: Vec<usize>,
    /// The buckets' all-reduces, in launch order.
    pub launches: Vec<BucketLaunch>,
    /// Per watched tensor ([`DistributedDataParallel::watch`]), in the
    /// order their gradients were computed: how many buckets had been
    /// launched at that moment.
    ///
    /// [`DistributedDataParallel::watch`]: crate::DistributedDataParallel::watch
    pub watched: Vec<usize>,
}

impl BackwardStats {
    pub(crate) fn from_raw(
        reports: Vec<i64>,
        launches: Vec<(i64, i64)>,
        watched: Vec<i64>,
    ) -> Self {
        let ns = |v: i64| Duration::from_nanos(v.max(0) as u64);
        BackwardStats {
            reports: reports.into_iter().map(|n| n.max(0) as usize).collect(),
            launches: launches
                .into_iter()
                .map(|(l, c)| BucketLaunch {
                    launched: ns(l),
                    completed: (c >= 0).then(|| ns(c)),
                })
                .collect(),
            watched: watched.into_iter().map(|n| n.max(0) as usize).collect(),
        }
    }

    /// The time some all-reduce was in flight: the union of the completed
    /// buckets' launch-to-completion intervals.
    pub fn communication(&self) -> Duration {
        union_of(
            self.launches
                .iter()
                .filter_map(|b| b.completed.map(|c| (b.launched, c)))
                .collect(),
        )
    }
}

/// The total length of the union of `spans` (start, end): the time some
/// collective was in flight.
pub(crate) fn union_of(mut spans: Vec<(Duration, Duration)>) -> Duration {
    spans.sort();
    let mut total = Duration::ZERO;
    let mut open: Option<(Duration, Duration)> = None;
    for (start, end) in spans {
        open = match open {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = open {
        total += e - s;
    }
    total
}
