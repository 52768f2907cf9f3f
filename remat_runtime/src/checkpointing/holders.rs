//! The holders of one checkpoint call, and their refill: the forward adds
//! one per save it does not keep (rule C3); a replay fills them in save
//! order (C6), counts and checks what it saves (C13), and stops by the one
//! stop rule (C17, `StopState::reached`). Everything a replay changes of
//! them goes through the methods here; `holder` and `replay` drive them.
//!
//! Invariants: slot k is the k-th save of the forward, held weakly, so a
//! holder autograd released is not filled; a graph task is replayed at
//! most once (`replayed`), and a replay's count, first error and stop state
//! are reset when it begins.
//!
//! docs/semantics.md rules kept here: C3 (holders in save order), C6 (the
//! k-th save fills holder k), C7 (nothing to rebuild, nothing run), C8
//! (once per graph task; each value handed out once), C13 (the count and
//! determinism checks), C16 (values kept while the forward runs), C17 (the
//! stop rule).

use crate::bridge::NodeId;
use crate::checkpointing::determinism::{Determinism, ForwardSave};
use crate::checkpointing::early_stop::{ends_its_op, StopState};
use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use tch::Tensor;

/// The holders of one checkpoint call and the state of their refill.
#[derive(Default)]
pub(crate) struct Holders {
    /// One per save of the forward, in save order.
    slots: Vec<Weak<HolderSlot>>,
    /// What determinism checks each replayed save against (C13).
    forward_saves: Vec<ForwardSave>,
    /// `Save` regions of the forward with saves rebuilt on replay (S3):
    /// replay must reach each before it may stop.
    rebuild_regions: usize,
    /// Graph tasks this checkpoint has replayed for.
    replayed: HashSet<i64>,
    /// Saves made so far by the running replay.
    count: usize,
    /// The first error a replay's hooks met (they cannot return it).
    error: Option<String>,
    /// The forward's last saving node, how many saves in a row it made, and
    /// the most any node made in a row: how many saves the op that stops a
    /// replay can make (its node's, or its last node's for a composite).
    last_node: Option<NodeId>,
    run: usize,
    most_per_node: usize,
    /// The running replay's save after which the stop's fallback must be
    /// active: before the first save the stopping op can make.
    arm_at: usize,
    /// What the running replay must still rebuild, and whether it stopped.
    stop: StopState,
}

/// What the replay's k-th save became.
pub(crate) enum Filled {
    /// Counted (and put in its holder, if autograd still keeps it);
    /// `arm`: from here on the stop's fallback must run every op.
    Counted { arm: bool },
    /// Counted, and the last thing backward needs: the replay stops here;
    /// `end_op`: the op making it is worth ending (`early_stop::ends_its_op`).
    Stop { end_op: bool },
    /// Made after the stop, by an op of the tail that still runs: dropped.
    Dropped,
}

impl Holders {
    /// Adds the forward's next save as holder `slot`; returns its index.
    // docs/semantics.md, rule C3.
    pub(crate) fn add(
        &mut self,
        slot: &Arc<HolderSlot>,
        tensor: &Tensor,
        determinism: Determinism,
        node: Option<NodeId>,
    ) -> usize {
        // An unknown node counts as a new one each time: the count is then
        // low, the fallback armed late, and a stop it misses still correct
        // (early_stop.rs: the op computes, and its results are dry).
        self.run = if node.is_some() && node == self.last_node {
            self.run + 1
        } else {
            1
        };
        self.last_node = node;
        self.most_per_node = self.most_per_node.max(self.run);
        self.slots.push(Arc::downgrade(slot));
        determinism.record(&mut self.forward_saves, tensor);
        self.slots.len() - 1
    }

    /// Counts a `Save` region of the forward whose saves a replay rebuilds.
    pub(crate) fn add_rebuilding_region(&mut self) {
        self.rebuild_regions += 1;
    }

    /// Whether graph task `task` has been replayed for.
    pub(crate) fn replayed(&self, task: i64) -> bool {
        self.replayed.contains(&task)
    }

    /// Starts a replay for `task`: whether its closure must run. When it
    /// need not (nothing left to rebuild), the task counts as replayed.
    pub(crate) fn begin(&mut self, task: i64, early_stop: bool) -> bool {
        self.count = 0;
        self.error = None;
        // docs/semantics.md, rule C17: one past the last holder autograd
        // still keeps, and every region to rebuild.
        let holders = self
            .slots
            .iter()
            .rposition(|h| h.strong_count() > 0)
            .map_or(0, |last| last + 1);
        self.stop = StopState::start(early_stop, holders, self.rebuild_regions);
        self.arm_at = holders.saturating_sub(self.most_per_node);
        // docs/semantics.md, rule C7: a closure that left nothing to rebuild
        // is not run again, with early stop off too, as torch never
        // recomputes one that saved nothing.
        let nothing_to_rebuild = holders == 0 && self.rebuild_regions == 0;
        if nothing_to_rebuild || self.stop.reached(0) {
            self.replayed.insert(task);
            return false;
        }
        true
    }

    /// The replay's next save: checked against the forward's (C13), put in
    /// its holder for `task` (C6), unless the replay is stopped (C17).
    pub(crate) fn fill_next(
        &mut self,
        task: i64,
        tensor: Tensor,
        determinism: Determinism,
    ) -> Filled {
        if self.stop.reached(self.count) {
            return Filled::Dropped;
        }
        // Sized only for the save that stops the replay.
        let end_op = self.stop.would_reach(self.count + 1) && ends_its_op(&tensor);
        let index = self.count;
        self.count += 1;
        if index < self.slots.len() {
            if let Err(message) = determinism.check(&self.forward_saves, index, &tensor) {
                self.error.get_or_insert(message);
            }
            if let Some(slot) = self.slots[index].upgrade() {
                slot.fill(task, tensor);
            }
        }
        // The last save backward needs stops the replay at once: the op
        // saving it does not even compute (early_stop.rs).
        if self.stop.reached(self.count) {
            return Filled::Stop { end_op };
        }
        Filled::Counted {
            arm: self.count == self.arm_at,
        }
    }

    /// A skipped `Save` region rebuilt its saves: whether that was the last
    /// thing backward needs, so that the replay stops now (C17).
    pub(crate) fn region_rebuilt(&mut self) -> bool {
        self.stop.note_rebuilt();
        self.stop.reached(self.count)
    }

    /// The save after which the running replay's stop fallback must be
    /// active (0: from its start).
    pub(crate) fn arm_at(&self) -> usize {
        self.arm_at
    }

    /// Whether the running replay stopped (C17).
    pub(crate) fn stopped(&self) -> bool {
        self.stop.stopped()
    }

    /// Ends a replay for `task` whose closure returned or stopped: the count
    /// and the first determinism error (C13), then the task is replayed.
    pub(crate) fn finish(&mut self, task: i64) -> Result<(), String> {
        // docs/semantics.md, rule C13 (E8): checked when the closure ran to
        // its end; a stopped replay saved exactly as many as backward needs.
        if !self.stop.stopped() && self.count != self.slots.len() {
            return Err(format!(
                "the forward saved {} tensors for backward but the replay saved {}; \
                 forward and replay followed different code paths (the closure must do \
                 the same work both times)",
                self.slots.len(),
                self.count
            ));
        }
        // After the count: when the count differs, the paths differ and the
        // metadata of the saves after the first extra or missing one differs
        // only because they are shifted (E8 says more than E9 then).
        if let Some(message) = self.error.take() {
            return Err(message);
        }
        self.replayed.insert(task);
        Ok(())
    }

    /// The slots autograd still keeps.
    pub(crate) fn live(&self) -> Vec<Arc<HolderSlot>> {
        self.slots.iter().filter_map(Weak::upgrade).collect()
    }
}

/// Where a replay puts the value of one forward save, per graph task (a
/// retained graph replays once per backward).
#[derive(Default)]
pub(crate) struct HolderSlot {
    values: Mutex<HashMap<i64, Option<Tensor>>>,
    /// The forward's value, detached, while the forward of a checkpoint
    /// whose closure computes gradients itself runs (C16).
    forward: Mutex<Option<Tensor>>,
}

impl HolderSlot {
    /// A slot that keeps `value` until the forward ends (C16).
    pub(crate) fn keeping(value: Tensor) -> HolderSlot {
        HolderSlot {
            values: Mutex::default(),
            forward: Mutex::new(Some(value)),
        }
    }

    /// The forward's value, while the forward runs (C16).
    pub(crate) fn forward_value(&self) -> Option<Tensor> {
        lock(&self.forward).as_ref().map(Tensor::shallow_clone)
    }

    /// Lets go of the forward's value: the forward ended.
    pub(crate) fn end_forward(&self) {
        lock(&self.forward).take();
    }

    fn fill(&self, task: i64, value: Tensor) {
        lock(&self.values).insert(task, Some(value));
    }

    /// The value replay put here for `task`, once (C8).
    pub(crate) fn take(&self, task: i64) -> Option<Tensor> {
        lock(&self.values).remove(&task).flatten()
    }
}
