//! Telling a user's saved-tensor hooks that a checkpoint starts to
//! recompute: the pairs that met the checkpoint's forward (its own, the
//! one around it, those pushed inside it) and asked to be told
//! (`TensorHooks::on_recompute`), once per graph task, before any of the
//! checkpoint's saves is unpacked and before its closure runs again.
//!
//! Invariant: each pair is told at most once per graph task and
//! checkpoint, and always before the first unpack of that task: every path
//! that unpacks a save of the checkpoint (a holder's recomputation, a kept
//! or rebuilt save of a `Save` region) calls [`Told::tell`] first.
//!
//! docs/semantics.md rule kept here: T9.

use crate::checkpointing::tensor_hooks::{RecomputeStart, TensorHooks};
use crate::sync::lock;
use std::any::Any;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The pairs to tell, and the graph tasks they were told about.
#[derive(Default)]
pub(crate) struct Told {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each pair with its context for this checkpoint.
    pairs: Vec<(TensorHooks, Option<Arc<dyn Any + Send + Sync>>)>,
    tasks: HashSet<i64>,
}

impl Told {
    /// `hooks` met the checkpoint's forward: tell it when it recomputes (if
    /// it asked to be told; once, however often it met it).
    pub(crate) fn register(&self, hooks: &TensorHooks) {
        if !hooks.tells() {
            return;
        }
        let mut inner = lock(&self.inner);
        if inner.pairs.iter().any(|(h, _)| h.same(hooks)) {
            return;
        }
        let context = hooks.capture();
        inner.pairs.push((hooks.clone(), context));
    }

    /// The checkpoint `name` starts to recompute for graph task `task`:
    /// tells every registered pair, the first time for this task.
    pub(crate) fn tell(&self, name: Option<&str>, task: i64) -> Result<(), String> {
        let pairs = {
            let mut inner = lock(&self.inner);
            if inner.pairs.is_empty() || !inner.tasks.insert(task) {
                return Ok(());
            }
            inner.pairs.clone()
        };
        // The callbacks run outside the lock: they may do anything.
        let mut first = None;
        for (hooks, context) in pairs {
            let start = RecomputeStart {
                checkpoint: name.map(str::to_string),
                context,
            };
            if let Err(m) = hooks.recompute_started(&start) {
                first.get_or_insert(m);
            }
        }
        first.map_or(Ok(()), Err)
    }
}
