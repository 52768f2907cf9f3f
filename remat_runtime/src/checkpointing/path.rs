//! The forward's path, and recomputation held to it: what the forward of
//! one checkpoint call did that its recomputation must do again (the
//! regions it entered, with name, policy and how many tensors they took;
//! the checkpoints it called; each ask for one of its save outputs), and
//! the check of each recomputation against that record as it goes.
//!
//! The asks are matched per stretch between two regions or checkpoints: a
//! recomputation may leave out asks its forward made there (a `needs` only
//! the forward reaches, logging under `on_forward()`), but an ask the
//! forward did not make there, or one more of the same output, is a
//! divergence. Regions and checkpoints match one for one, in order. A
//! recomputation that stops early (rule C17) is checked up to its stop.
//!
//! Invariant: the record is written on the forward only and read during
//! recomputation only; a recomputation's check starts afresh at its start
//! (`begin`) and stops checking after its first divergence, which fails
//! the recomputation.
//!
//! docs/semantics.md rules kept here: R5 (the same path), R11 (what is
//! recorded and how it is matched), K9 (served outputs are known by their
//! storage during recomputation).

use crate::bridge::{storage_key, StorageKey};
use crate::checkpointing::save_region::record::SaveRecord;
use crate::policy::Policy;
use std::borrow::Cow;
use std::panic::Location;
use std::sync::Arc;
use tch::Tensor;

/// Where a step was reached.
pub(crate) type At = &'static Location<'static>;

/// Who asks for a save output (docs/semantics.md, rules K2, K4, K5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Asker {
    /// `needs`.
    Needs,
    /// `recompute_needs_tensor`.
    RecomputeNeedsTensor,
    /// A `Recompute` region, of its arguments (its name).
    Argument(Cow<'static, str>),
    /// A checkpoint's closure, of what it returns.
    Returned,
}

/// How a checkpoint called inside another ran (rule C4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Run {
    /// As a checkpoint of its own.
    Checkpointed,
    /// As plain code: `enabled(false)`.
    Disabled,
    /// As plain code: the active plan or policy table switched it off.
    SwitchedOff,
    /// As plain code: grad mode was off.
    NoGrad,
}

impl Run {
    fn describe(self) -> &'static str {
        match self {
            Run::Checkpointed => "as a checkpoint",
            Run::Disabled => "as plain code (`enabled(false)`)",
            Run::SwitchedOff => "as plain code (switched off by the active plan or policy table)",
            Run::NoGrad => "as plain code (grad mode off)",
        }
    }
}

/// One thing the forward did that recomputation must do again.
pub(crate) enum Step {
    Region {
        name: Cow<'static, str>,
        policy: Policy,
        tensors: usize,
        at: At,
    },
    Checkpoint {
        name: Option<String>,
        run: Run,
        at: At,
    },
    Ask {
        record: Arc<SaveRecord>,
        slot: usize,
        by: Asker,
        at: At,
        /// Matched by an ask of the running recomputation (reset when one
        /// begins).
        matched: bool,
    },
}

impl Step {
    /// A step of an ask, as the forward notes it.
    pub(crate) fn ask(record: Arc<SaveRecord>, slot: usize, by: Asker, at: At) -> Step {
        Step::Ask {
            record,
            slot,
            by,
            at,
            matched: false,
        }
    }
}

impl Step {
    fn is_ask(&self) -> bool {
        matches!(self, Step::Ask { .. })
    }

    /// The same step, wherever each was reached.
    fn same(&self, other: &Step) -> bool {
        match (self, other) {
            (
                Step::Region {
                    name: a,
                    policy: p,
                    tensors: n,
                    ..
                },
                Step::Region {
                    name: b,
                    policy: q,
                    tensors: m,
                    ..
                },
            ) => a == b && p == q && n == m,
            (
                Step::Checkpoint {
                    name: a, run: r, ..
                },
                Step::Checkpoint {
                    name: b, run: s, ..
                },
            ) => a == b && r == s,
            (Step::Ask { .. }, Step::Ask { .. }) => self.same_ask(other),
            _ => false,
        }
    }

    /// Both ask for the same output.
    fn same_ask(&self, other: &Step) -> bool {
        match (self, other) {
            (
                Step::Ask {
                    record: a, slot: i, ..
                },
                Step::Ask {
                    record: b, slot: j, ..
                },
            ) => Arc::ptr_eq(a, b) && i == j,
            _ => false,
        }
    }

    /// What the step is, without where: `region `c::r` (`save`, 1 tensor
    /// input)`, `checkpoint `inner` as a checkpoint`, or an ask.
    fn what(&self, checkpoint: Option<&str>) -> String {
        match self {
            Step::Region {
                name,
                policy,
                tensors,
                ..
            } => format!(
                "region `{}` (`{}`, {tensors} tensor input{})",
                within(checkpoint, name),
                policy.word(),
                if *tensors == 1 { "" } else { "s" }
            ),
            Step::Checkpoint { name, run, .. } => format!(
                "checkpoint `{}` {}",
                name.as_deref().unwrap_or("<unnamed>"),
                run.describe()
            ),
            Step::Ask { record, slot, .. } => format!("`{}`", output_name(record, *slot)),
        }
    }

    fn at(&self) -> At {
        match self {
            Step::Region { at, .. } | Step::Checkpoint { at, .. } | Step::Ask { at, .. } => at,
        }
    }

    /// What doing it is called: `entered`, `ran`, `asked for`.
    fn verb(&self) -> (&'static str, &'static str) {
        match self {
            Step::Region { .. } => ("entered", "entering"),
            Step::Checkpoint { .. } => ("ran", "running"),
            Step::Ask { .. } => ("asked for", "asking for"),
        }
    }

    /// The step done, where: `entered region ... at FILE:LINE:COL`.
    fn describe(&self, checkpoint: Option<&str>) -> String {
        let (what, at) = (self.what(checkpoint), self.at());
        match self {
            Step::Ask { by, .. } => match by {
                Asker::Needs => format!("marked {what} with `needs` at {at}"),
                Asker::RecomputeNeedsTensor => {
                    format!("asked for {what} with `recompute_needs_tensor` at {at}")
                }
                Asker::Argument(region) => format!(
                    "passed {what} to the `recompute` region `{}` at {at}",
                    within(checkpoint, region)
                ),
                Asker::Returned => format!("returned {what} at {at}"),
            },
            _ => format!("{} {what} at {at}", self.verb().0),
        }
    }
}

fn within(checkpoint: Option<&str>, region: &str) -> String {
    match checkpoint {
        Some(c) => format!("{c}::{region}"),
        None => region.to_string(),
    }
}

/// `checkpoint::region.out`, or `.i` for output `i` of several (as
/// placeholders name them).
pub(crate) fn output_name(record: &SaveRecord, slot: usize) -> String {
    if record.output_count() == 1 {
        format!("{}.out", record.display())
    } else {
        format!("{}.{slot}", record.display())
    }
}

/// The forward's record of one checkpoint call, and the running
/// recomputation's place in it.
#[derive(Default)]
pub(crate) struct Path {
    /// Whether the path is recorded and checked (off under
    /// `Determinism::None`).
    on: bool,
    log: Vec<Step>,
    /// The forward's `Save` regions: where a value served during
    /// recomputation is found (each output notes what it served, and in
    /// which recomputation).
    records: Vec<Arc<SaveRecord>>,
    check: Option<Check>,
    /// The running recomputation's served values: storage, index in
    /// `records`, output slot (the storages are pinned by the outputs'
    /// notes). A list, not a map: looked up by asks only, and as long as
    /// the regions served.
    served: Vec<(StorageKey, u32, u32)>,
}

/// One recomputation's place in the forward's record.
struct Check {
    /// Where the current stretch of asks starts in the log.
    start: usize,
    /// One past its end: the next region or checkpoint, or the log's end.
    end: usize,
    /// The first divergence: the recomputation fails with it, and nothing
    /// more is checked.
    diverged: Option<Divergence>,
    /// The recomputation stopped early (C17): what its dry tail does is
    /// not checked.
    stopped: bool,
}

/// A recomputation that left its forward's path: the message.
pub(crate) type Divergence = String;

impl Path {
    /// A path with room for `steps` steps and `records` regions (the
    /// sizes the checkpoint's last forward reached: no growth on the hot
    /// path).
    pub(crate) fn new(on: bool, steps: usize, records: usize) -> Path {
        Path {
            on,
            log: Vec::with_capacity(if on { steps } else { 0 }),
            records: Vec::with_capacity(if on { records } else { 0 }),
            ..Path::default()
        }
    }

    /// How many steps the forward noted.
    pub(crate) fn len(&self) -> usize {
        self.log.len()
    }

    /// On the forward: note a step.
    pub(crate) fn record(&mut self, step: Step) {
        if self.on {
            self.log.push(step);
        }
    }

    /// On the forward: a `Save` region ran (its outputs may be served).
    pub(crate) fn save_region(&mut self, record: &Arc<SaveRecord>) {
        if self.on {
            self.records.push(record.clone());
        }
    }

    /// A recomputation starts: at the head of the record.
    pub(crate) fn begin(&mut self) {
        if !self.on {
            return;
        }
        for step in &mut self.log {
            if let Step::Ask { matched, .. } = step {
                *matched = false;
            }
        }
        let end = self.stretch_end(0);
        self.served.clear();
        self.check = Some(Check {
            start: 0,
            end,
            diverged: None,
            stopped: false,
        });
    }

    /// The running recomputation stopped early (rule C17): checked up to
    /// here, not after.
    pub(crate) fn stop(&mut self) {
        if let Some(check) = &mut self.check {
            check.stopped = true;
        }
    }

    /// Whether a recomputation is being checked (what it serves is noted).
    pub(crate) fn checking(&self) -> bool {
        self.check.is_some()
    }

    /// A recomputation ended (its check is dropped): its first divergence,
    /// or, when it ran to its end, what its forward did after the last step
    /// it took.
    pub(crate) fn finish(
        &mut self,
        checkpoint: Option<&str>,
        ran_whole: bool,
    ) -> Option<Divergence> {
        let check = self.check.take()?;
        if check.diverged.is_some() {
            return check.diverged;
        }
        if !ran_whole {
            return None;
        }
        let next = self.log.get(check.end)?;
        Some(divergence(
            &format!(
                "its recomputation ended without {} {}, which its forward {} at {}",
                next.verb().1,
                next.what(checkpoint),
                next.verb().0,
                next.at()
            ),
            self.previous(check.end, checkpoint),
        ))
    }

    /// During recomputation: a region or a checkpoint, which must be the
    /// forward's next one.
    pub(crate) fn follow(
        &mut self,
        checkpoint: Option<&str>,
        step: Step,
    ) -> Result<(), Divergence> {
        let at = match &self.check {
            Some(check) if check.diverged.is_none() && !check.stopped => check.end,
            _ => return Ok(()),
        };
        if self.log.get(at).is_some_and(|s| s.same(&step)) {
            let end = self.stretch_end(at + 1);
            let check = self.check.as_mut().expect("checked above");
            check.start = at + 1;
            check.end = end;
            return Ok(());
        }
        let forward = match self.log.get(at) {
            Some(s) => format!("where its forward {}", s.describe(checkpoint)),
            None => "after its forward's last step".to_string(),
        };
        let message = divergence(
            &format!("its recomputation {}, {forward}", step.describe(checkpoint)),
            self.previous(at, checkpoint),
        );
        self.check.as_mut().expect("checked above").diverged = Some(message.clone());
        Err(message)
    }

    /// Whether the running recomputation has served a save output (before
    /// it has, an ask finds nothing to check).
    pub(crate) fn serves_any(&self) -> bool {
        self.check.is_some() && !self.served.is_empty()
    }

    /// During recomputation: output `slot` of `record` was served on the
    /// storage `key` (which the output's note pins).
    pub(crate) fn served(&mut self, record: &Arc<SaveRecord>, slot: usize, key: StorageKey) {
        if self.check.is_none() {
            return;
        }
        if let Some(index) = self.records.iter().rposition(|r| Arc::ptr_eq(r, record)) {
            self.served.push((key, index as u32, slot as u32));
        }
    }

    /// During recomputation: an ask of `t` by `by` at `at`; each output
    /// served on its storage in this recomputation must be one the forward
    /// asked for here.
    pub(crate) fn ask(
        &mut self,
        checkpoint: Option<&str>,
        t: &Tensor,
        by: &Asker,
        at: At,
    ) -> Result<(), Divergence> {
        let Some(check) = self.check.as_ref() else {
            return Ok(());
        };
        if check.diverged.is_some() || check.stopped || self.served.is_empty() {
            return Ok(());
        }
        let Some(key) = storage_key(t) else {
            return Ok(());
        };
        // Inline for the usual one output found.
        let (mut first, mut more) = (None, Vec::new());
        for &(k, index, slot) in &self.served {
            if k == key {
                let found = (self.records[index as usize].clone(), slot as usize);
                if first.is_none() {
                    first = Some(found);
                } else {
                    more.push(found);
                }
            }
        }
        for (record, slot) in first.into_iter().chain(more) {
            self.match_ask(checkpoint, Step::ask(record, slot, by.clone(), at))?;
        }
        Ok(())
    }

    fn match_ask(&mut self, checkpoint: Option<&str>, step: Step) -> Result<(), Divergence> {
        let check = self.check.as_mut().expect("a running check");
        let (start, end) = (check.start, check.end);
        for s in &mut self.log[start..end] {
            let same = step.same_ask(s);
            if let Step::Ask { matched, .. } = s {
                if !*matched && same {
                    *matched = true;
                    return Ok(());
                }
            }
        }
        let log = &self.log;
        let made: Vec<String> = log[start..end]
            .iter()
            .filter(|s| s.same_ask(&step))
            .map(|s| s.at().to_string())
            .collect();
        let forward = match made.len() {
            0 => "where its forward asked for no such output".to_string(),
            1 => format!(
                "one time more than its forward did there (once, at {})",
                made[0]
            ),
            n => format!(
                "one time more than its forward did there ({n} times, at {})",
                made.join(", ")
            ),
        };
        let place = match (start.checked_sub(1).map(|i| &log[i]), log.get(end)) {
            (Some(before), Some(after)) => format!(
                " (after it {}, before it {})",
                before.describe(checkpoint),
                after.describe(checkpoint)
            ),
            (Some(before), None) => format!(" (after it {})", before.describe(checkpoint)),
            (None, Some(after)) => format!(" (before it {})", after.describe(checkpoint)),
            (None, None) => String::new(),
        };
        let message = divergence(
            &format!(
                "its recomputation {}, {forward}{place}",
                step.describe(checkpoint)
            ),
            None,
        );
        self.check.as_mut().expect("a running check").diverged = Some(message.clone());
        Err(message)
    }

    /// The first index at or after `from` that is not an ask.
    fn stretch_end(&self, from: usize) -> usize {
        (from..self.log.len())
            .find(|&i| !self.log[i].is_ask())
            .unwrap_or(self.log.len())
    }

    /// The last region or checkpoint before index `at`, for the message.
    fn previous(&self, at: usize, checkpoint: Option<&str>) -> Option<String> {
        self.log[..at.min(self.log.len())]
            .iter()
            .rev()
            .find(|s| !s.is_ask())
            .map(|s| s.describe(checkpoint))
    }
}

/// E36: what a divergence says (the checkpoint's name comes first, from the
/// error that carries it).
fn divergence(what: &str, last_agreed: Option<String>) -> Divergence {
    let agreed = match last_agreed {
        Some(step) => format!("; the last step both took: it {step}"),
        None => String::new(),
    };
    format!(
        "recomputation left its forward's path: {what}{agreed}. A recomputation must enter \
         the regions and checkpoints its forward entered, in order, and ask only for the save \
         outputs its forward asked for there: code that runs only on one of the two (under \
         `is_recomputing()`, in the `None` arm of `on_forward()`) may log, but must not enter \
         regions, call checkpoints or mark save outputs (docs/semantics.md, rule R11)"
    )
}
