//! State that replay must see as the forward saw it.

use std::any::Any;
use std::sync::Arc;

/// Snapshots and restores state (an RNG, a counter) around replay, so that
/// replay draws what the forward drew.
///
/// With hooks registered on a checkpoint: snapshot at checkpoint entry and
/// after each `Save` region on the forward; at replay start the outer state is
/// snapshotted and the entry snapshot restored; a skipped `Save` region
/// restores its exit snapshot; at replay end the outer state is restored, so
/// replay's draws never leak into the rest of backward. Restores are absolute.
///
/// ```
/// use remat_runtime::RecomputeStateHook;
/// use std::any::Any;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// struct Counter(AtomicU64);
///
/// impl RecomputeStateHook for Counter {
///     fn snapshot(&self) -> Box<dyn Any + Send> {
///         Box::new(self.0.load(Ordering::SeqCst))
///     }
///     fn restore(&self, snapshot: &(dyn Any + Send)) {
///         self.0.store(*snapshot.downcast_ref::<u64>().unwrap(), Ordering::SeqCst);
///     }
/// }
/// ```
pub trait RecomputeStateHook: Send + Sync + 'static {
    /// The current state.
    fn snapshot(&self) -> Box<dyn Any + Send>;
    /// Sets the state to a snapshot this hook took.
    fn restore(&self, snapshot: &(dyn Any + Send));
}

pub(crate) type Snapshots = Vec<Box<dyn Any + Send>>;

pub(crate) fn snapshot_all(hooks: &[Arc<dyn RecomputeStateHook>]) -> Snapshots {
    hooks.iter().map(|h| h.snapshot()).collect()
}

pub(crate) fn restore_all(hooks: &[Arc<dyn RecomputeStateHook>], snaps: &Snapshots) {
    for (h, s) in hooks.iter().zip(snaps) {
        h.restore(&**s);
    }
}

/// Restores a snapshot when dropped (also when unwinding).
pub(crate) struct RestoreOnDrop<'a> {
    pub hooks: &'a [Arc<dyn RecomputeStateHook>],
    pub snapshots: Snapshots,
}

impl Drop for RestoreOnDrop<'_> {
    fn drop(&mut self) {
        restore_all(self.hooks, &self.snapshots);
    }
}
