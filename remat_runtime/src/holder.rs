//! Holders: what autograd keeps, inside a checkpoint, instead of a saved
//! tensor. The forward leaves them empty; the replay fills them in save
//! order (the k-th save of the replay fills holder k).

use crate::bridge::{graph_task_id, HookPair, Payload};
use crate::checkpoint::{CheckpointState, TensorMeta};
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tch::Tensor;

/// One saved tensor of the forward. Keyed by graph task, because a retained
/// graph replays once per backward.
pub(crate) struct Holder {
    state: Arc<CheckpointState>,
    index: usize,
    values: Mutex<HashMap<i64, Option<Tensor>>>,
}

impl Holder {
    pub(crate) fn fill(&self, task: i64, value: Tensor) {
        lock(&self.values).insert(task, Some(value));
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while a lock was held leaves plain data behind; go on.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The id of the running backward, or a fresh one outside backward (so that
/// every unpack there replays, as PyTorch does).
pub(crate) fn current_task() -> i64 {
    static OUTSIDE: AtomicI64 = AtomicI64::new(-1);
    match graph_task_id() {
        Some(id) => id as i64,
        None => OUTSIDE.fetch_sub(1, Ordering::Relaxed),
    }
}

/// The checkpoint's hook on the forward: every save becomes an empty holder.
pub(crate) struct ForwardHooks(pub Arc<CheckpointState>);

impl HookPair for ForwardHooks {
    fn pack(&self, tensor: Tensor) -> Result<Payload, String> {
        let state = &self.0;
        let mut inner = lock(&state.inner);
        let index = inner.holders.len();
        let holder = Arc::new(Holder {
            state: state.clone(),
            index,
            values: Mutex::new(HashMap::new()),
        });
        inner.holders.push(Arc::downgrade(&holder));
        state.determinism.record(&mut inner.forward_saves, &tensor);
        Ok(Box::new(holder))
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String> {
        let holder = payload
            .downcast_ref::<Arc<Holder>>()
            .ok_or("remat internal error: foreign payload in a checkpoint holder")?;
        let task = current_task();
        holder
            .state
            .replay_if_needed(task)
            .map_err(|e| e.to_string())?;
        let value = lock(&holder.values).remove(&task).flatten();
        value.ok_or_else(|| {
            format!(
                "checkpoint `{}`: saved tensor {} was not refilled by the replay, or was \
                 unpacked twice in one backward",
                holder.state.display_name(),
                holder.index
            )
        })
    }
}

/// The hook during replay: fills holder k with the k-th save.
pub(crate) struct ReplayHooks {
    pub state: Arc<CheckpointState>,
    pub task: i64,
}

impl HookPair for ReplayHooks {
    fn pack(&self, tensor: Tensor) -> Result<Payload, String> {
        let mut inner = lock(&self.state.inner);
        let index = inner.replay_count;
        inner.replay_count += 1;
        if index < inner.holders.len() {
            if let Err(message) = self
                .state
                .determinism
                .check(&inner.forward_saves, index, &tensor)
            {
                inner.replay_error.get_or_insert(message);
            }
            if let Some(holder) = inner.holders[index].upgrade() {
                holder.fill(self.task, tensor);
            }
        }
        Ok(Box::new(()))
    }

    fn unpack(&self, _: &(dyn Any + Send)) -> Result<Tensor, String> {
        Err("remat internal error: the replay's own graph was backpropagated".into())
    }
}

/// What the determinism check keeps of each forward save.
pub(crate) enum ForwardSave {
    Nothing,
    Meta(TensorMeta),
    Value(TensorMeta, Tensor),
}
