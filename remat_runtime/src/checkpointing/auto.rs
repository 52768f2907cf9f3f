//! Run-time decisions for `Policy::Auto` regions and `auto()` checkpoints:
//! the decision table (a plan) or the rules (a policy table) active on this
//! thread, and what one checkpoint call resolved from it.
//!
//! Invariants: a checkpoint resolves its decision once, on the forward, when
//! it starts (`resolve`), and keeps it in its state; its regions and its
//! replay (on any thread) read only that, never the thread-local table, so
//! replay always sees the forward's decision. Activation is a stack per
//! thread, undone by guards (also when unwinding).
//!
//! Rules are asked by name when a region runs; they answer the same for the
//! same names every time (a table never changes once active), so replay
//! still sees the forward's decision.
//!
//! docs/semantics.md, rules R3 (`Auto` regions), C4 (an `auto()`
//! checkpoint the plan switches off) and Q1-Q5 (policy tables); E25 for a
//! plan that does not match.

use crate::policy::Policy;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

/// What the table decides for one checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Whether an `auto()` checkpoint checkpoints (otherwise a plain call).
    pub checkpointed: bool,
    /// `Save` or `Recompute` per `Auto` region name.
    pub regions: Vec<(String, Policy)>,
    /// The input shapes the plan was made for (`None`: not checked).
    pub inputs: Option<Vec<Vec<i64>>>,
}

/// Decisions by checkpoint name: what a plan becomes when activated.
#[derive(Debug, Default)]
pub(crate) struct DecisionTable {
    /// How errors name the table (e.g. "the active plan (budget 60.0 MiB)").
    pub describe: String,
    pub checkpoints: HashMap<String, Arc<Decision>>,
}

/// Decisions by pattern (a policy table): `None` where the rules do not
/// cover a name, which then gets the code's default.
pub(crate) trait Rules: Send + Sync + std::fmt::Debug {
    /// Whether the `auto()` checkpoint `checkpoint` checkpoints.
    fn checkpoint(&self, checkpoint: &str) -> Option<bool>;
    /// The policy (`Save` or `Recompute`) of the `Auto` region `region` in
    /// checkpoint `checkpoint`.
    fn region(&self, checkpoint: &str, region: &str) -> Option<Policy>;
}

/// What can be active: a plan's exact table or a policy table's rules.
#[derive(Clone, Debug)]
enum Active {
    Plan(Arc<DecisionTable>),
    Rules(Arc<dyn Rules>),
}

thread_local! {
    /// `None` entries mask outer tables (the profiler runs "no plan").
    static ACTIVE: RefCell<Vec<Option<Active>>> = const { RefCell::new(Vec::new()) };
}

/// Pops the table it pushed when dropped; stays on its thread.
pub(crate) struct ActiveGuard {
    depth: usize,
    _not_send: PhantomData<*const ()>,
}

/// Makes `table` (or, with `None`, no table) the active one on this thread
/// until the guard drops.
pub(crate) fn push(table: Option<Arc<DecisionTable>>) -> ActiveGuard {
    push_active(table.map(Active::Plan))
}

/// Makes `rules` the active decisions on this thread until the guard drops.
pub(crate) fn push_rules(rules: Arc<dyn Rules>) -> ActiveGuard {
    push_active(Some(Active::Rules(rules)))
}

fn push_active(table: Option<Active>) -> ActiveGuard {
    ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        a.push(table);
        ActiveGuard {
            depth: a.len() - 1,
            _not_send: PhantomData,
        }
    })
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.borrow_mut().truncate(self.depth));
    }
}

/// What one checkpoint call resolved on its forward.
#[derive(Clone, Debug, Default)]
pub(crate) enum Resolved {
    /// No table was active: `auto()` checkpoints, `Auto` recomputes.
    #[default]
    NoPlan,
    /// A table was active but has no entry for this checkpoint.
    Missing(Arc<DecisionTable>),
    Decided(Arc<Decision>),
    /// A policy table was active: asked by name, defaults where it is silent.
    Rules(Arc<dyn Rules>),
}

/// The active table's decision for the checkpoint `name`.
pub(crate) fn resolve(name: Option<&str>) -> Resolved {
    ACTIVE.with(|a| match a.borrow().last() {
        None | Some(None) => Resolved::NoPlan,
        Some(Some(Active::Rules(rules))) => Resolved::Rules(rules.clone()),
        Some(Some(Active::Plan(table))) => match name.and_then(|n| table.checkpoints.get(n)) {
            Some(d) => Resolved::Decided(d.clone()),
            None => Resolved::Missing(table.clone()),
        },
    })
}

impl Resolved {
    /// Whether the plan's decision was made for inputs of these shapes
    /// (E25): under a plan for another model the figures would not hold,
    /// so the call fails, naming the checkpoint, instead of running with a
    /// wrong prediction.
    pub(crate) fn check_inputs(&self, inputs: &[Option<tch::Tensor>]) -> Result<(), String> {
        let Resolved::Decided(d) = self else {
            return Ok(());
        };
        let sizes = || -> Vec<Vec<i64>> { inputs.iter().flatten().map(|t| t.size()).collect() };
        match &d.inputs {
            Some(planned) if *planned != sizes() => {
                let sizes = sizes();
                Err(format!(
                    "the active plan was made for inputs of shapes {planned:?}, and this \
                     call's are {sizes:?}: the model changed since it was profiled, so the \
                     plan's predictions do not hold for it; profile the model again and make \
                     a new plan"
                ))
            }
            _ => Ok(()),
        }
    }

    /// Whether an `auto()` checkpoint named `checkpoint` checkpoints.
    pub(crate) fn checkpointed(&self, checkpoint: &str) -> Result<bool, String> {
        match self {
            Resolved::NoPlan => Ok(true),
            Resolved::Decided(d) => Ok(d.checkpointed),
            // docs/semantics.md, rule Q3: not covered, the code's default.
            Resolved::Rules(r) => Ok(r.checkpoint(checkpoint).unwrap_or(true)),
            Resolved::Missing(table) => Err(missing_checkpoint(table, checkpoint)),
        }
    }

    /// The policy of the `Auto` region `region` in checkpoint `checkpoint`.
    pub(crate) fn region(&self, checkpoint: &str, region: &str) -> Result<Policy, String> {
        match self {
            Resolved::NoPlan => Ok(Policy::Recompute),
            Resolved::Rules(r) => Ok(r.region(checkpoint, region).unwrap_or(Policy::Recompute)),
            Resolved::Decided(d) => d
                .regions
                .iter()
                .find(|(n, _)| n == region)
                .map(|(_, p)| *p)
                .ok_or_else(|| {
                    let known: Vec<&str> = d.regions.iter().map(|(n, _)| n.as_str()).collect();
                    format!(
                        "the active plan has no decision for this `auto` region (it knows, in \
                         checkpoint `{checkpoint}`: {}); the plan does not match the model: \
                         make a new plan from a profile of this model",
                        if known.is_empty() {
                            "no region".to_string()
                        } else {
                            known.join(", ")
                        }
                    )
                }),
            Resolved::Missing(table) => Err(missing_checkpoint(table, checkpoint)),
        }
    }
}

fn missing_checkpoint(table: &DecisionTable, checkpoint: &str) -> String {
    let mut known: Vec<&str> = table.checkpoints.keys().map(String::as_str).collect();
    known.sort_unstable();
    format!(
        "{} has no decision for checkpoint `{checkpoint}` (it covers {} checkpoint(s): {}); \
         the plan does not match the model: make a new plan from a profile of this model",
        table.describe,
        known.len(),
        known.join(", ")
    )
}
