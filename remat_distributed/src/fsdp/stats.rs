//! What a sharded model's step did, event by event: gathers (and which
//! were prefetched), forwards, backwards, reduce-scatters, frees
//! (docs/semantics.md, rule F7).

use std::time::Duration;

/// What happened to a sharded unit (rule F7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsdpEventKind {
    /// An all-gather of the unit's shards started, for its use now.
    GatherLaunch,
    /// An all-gather of the unit's shards started ahead of its use, while
    /// another unit computes (rule F7).
    Prefetch,
    /// That all-gather completed (written from c10d's thread).
    GatherDone,
    /// The unit's forward started (after its gather).
    ForwardStart,
    /// The unit's forward ended.
    ForwardEnd,
    /// The first gradient of the unit's outputs arrived: its backward starts.
    BackwardStart,
    /// The reduce-scatter of the unit's gradients started.
    ReduceLaunch,
    /// That reduce-scatter completed.
    ReduceDone,
    /// The unit's gathered parameters were freed.
    Freed,
}

impl FsdpEventKind {
    /// The kind of the event code `fsdp.cpp` logs (its `Event` enum's order).
    pub(crate) fn from_code(code: i64) -> Option<FsdpEventKind> {
        use FsdpEventKind::*;
        Some(match code {
            0 => GatherLaunch,
            1 => GatherDone,
            2 => ForwardStart,
            3 => ForwardEnd,
            4 => BackwardStart,
            5 => ReduceLaunch,
            6 => ReduceDone,
            7 => Freed,
            8 => Prefetch,
            _ => return None,
        })
    }
}

/// One event of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsdpEvent {
    /// What happened.
    pub kind: FsdpEventKind,
    /// To which unit.
    pub unit: String,
    /// When, since the sharded model was built.
    pub at: Duration,
}

/// The events of one step of a
/// [`FullyShardedDataParallel`](crate::FullyShardedDataParallel), in the
/// order they were recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsdpStats {
    /// The events.
    pub events: Vec<FsdpEvent>,
}

impl FsdpStats {
    /// The first event of `kind` for `unit`, if any.
    pub fn first(&self, kind: FsdpEventKind, unit: &str) -> Option<Duration> {
        self.events
            .iter()
            .find(|e| e.kind == kind && e.unit == unit)
            .map(|e| e.at)
    }

    /// The units whose gather was prefetched while another unit was computing
    /// its forward (between that unit's `ForwardStart` and `ForwardEnd`,
    /// the innermost such unit when they nest),
    /// as (prefetched, computing) pairs: the overlap of rule F7.
    pub fn prefetched_in_forward(&self) -> Vec<(String, String)> {
        // Units nest (a root unit around the blocks): the innermost one
        // running is the one computing.
        let mut running: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for e in &self.events {
            match e.kind {
                FsdpEventKind::ForwardStart => running.push(&e.unit),
                FsdpEventKind::ForwardEnd => {
                    if let Some(at) = running.iter().rposition(|u| *u == e.unit) {
                        running.remove(at);
                    }
                }
                FsdpEventKind::Prefetch => {
                    if let Some(c) = running.last() {
                        if *c != e.unit {
                            out.push((e.unit.clone(), c.to_string()));
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The units whose gather was prefetched during another unit's backward
    /// (after that unit's `BackwardStart`, the latest one), as
    /// (prefetched, in backward) pairs.
    pub fn prefetched_in_backward(&self) -> Vec<(String, String)> {
        let mut current: Option<&str> = None;
        let mut out = Vec::new();
        for e in &self.events {
            match e.kind {
                FsdpEventKind::BackwardStart => current = Some(&e.unit),
                FsdpEventKind::Prefetch => {
                    if let Some(c) = current {
                        if c != e.unit {
                            out.push((e.unit.clone(), c.to_string()));
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Time some collective of the step was in flight: the union of each
    /// gather's span (launch or prefetch to completion) and each
    /// reduce-scatter's (launch to the end of backward's wait for it, an
    /// upper bound: Gloo's reduce-scatter reports no completion of its
    /// own).
    pub fn communication(&self) -> Duration {
        let mut spans: Vec<(Duration, Duration)> = Vec::new();
        let mut open: Vec<(&str, FsdpEventKind, Duration)> = Vec::new();
        for e in &self.events {
            let (start, end) = match e.kind {
                FsdpEventKind::GatherLaunch | FsdpEventKind::Prefetch => (true, false),
                FsdpEventKind::ReduceLaunch => (true, false),
                FsdpEventKind::GatherDone | FsdpEventKind::ReduceDone => (false, true),
                _ => (false, false),
            };
            let family = |k: FsdpEventKind| match k {
                FsdpEventKind::ReduceLaunch | FsdpEventKind::ReduceDone => {
                    FsdpEventKind::ReduceLaunch
                }
                _ => FsdpEventKind::GatherLaunch,
            };
            if start {
                open.push((&e.unit, family(e.kind), e.at));
            } else if end {
                if let Some(at) = open
                    .iter()
                    .position(|(u, k, _)| *u == e.unit && *k == family(e.kind))
                {
                    let (_, _, begun) = open.remove(at);
                    spans.push((begun, e.at));
                }
            }
        }
        crate::stats::union_of(spans)
    }
}
