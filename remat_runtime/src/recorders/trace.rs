//! The trace: which regions (and scopes) a forward went through.
//!
//! Invariant: only the forward is recorded (replay is not), and a scope's
//! guard closes exactly the scope it opened (docs/semantics.md, rule D1).

use crate::policy::Policy;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::fmt;

/// One node of a [`Trace`].
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::collect_trace, region, diagnostics::trace_scope, Policy, diagnostics::TraceEntry};
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let (_, trace) = collect_trace(|| {
///     trace_scope("block", || {
///         checkpoint("c").call(&x, |x| region("mlp", Policy::Save).call(&x, |x| x.sin()))
///     })
/// });
/// let TraceEntry::Scope { name, metadata, entries } = &trace.entries[0] else {
///     panic!("expected a scope");
/// };
/// assert_eq!((name.as_str(), metadata), ("block", &None));
/// assert_eq!(entries[0], TraceEntry::Region { name: "mlp".into(), policy: Policy::Save });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEntry {
    /// A scope from [`trace_scope`] and what ran inside it.
    Scope {
        /// The scope's name.
        name: String,
        /// What [`trace_scope_with`] attached (shown in brackets after the
        /// name).
        metadata: Option<String>,
        /// What ran inside.
        entries: Vec<TraceEntry>,
    },
    /// A region reached on a checkpoint's forward.
    Region {
        /// The region's name (relative to its checkpoint).
        name: String,
        /// Its policy.
        policy: Policy,
    },
}

/// The tree of regions and scopes seen on the forward (replay is not
/// recorded), from [`collect_trace`].
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::collect_trace, region, diagnostics::trace_scope, Policy};
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let (_, trace) = collect_trace(|| {
///     trace_scope("block", || {
///         checkpoint("c").call(&x, |x| region("mlp", Policy::Recompute).call(&x, |x| x.sin()))
///     })
/// });
/// assert_eq!(trace.to_string(), "remat trace\n  block\n    mlp: recompute\n");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The top-level entries, in order.
    pub entries: Vec<TraceEntry>,
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn write(f: &mut fmt::Formatter<'_>, entries: &[TraceEntry], depth: usize) -> fmt::Result {
            for e in entries {
                let pad = "  ".repeat(depth);
                match e {
                    TraceEntry::Scope {
                        name,
                        metadata,
                        entries,
                    } => {
                        match metadata {
                            Some(m) => writeln!(f, "{pad}{name} [{m}]")?,
                            None => writeln!(f, "{pad}{name}")?,
                        }
                        write(f, entries, depth + 1)?;
                    }
                    TraceEntry::Region { name, policy } => {
                        writeln!(f, "{pad}{name}: {}", policy.word())?;
                    }
                }
            }
            Ok(())
        }
        writeln!(f, "remat trace")?;
        write(f, &self.entries, 1)
    }
}

/// An open scope: its name, metadata and entries so far.
type OpenScope = (String, Option<String>, Vec<TraceEntry>);

#[derive(Default)]
struct Collector {
    /// Open scopes; index 0 is the root.
    stack: Vec<OpenScope>,
}

/// Closes the innermost open scope into its parent.
fn close_top(stack: &mut Vec<OpenScope>) {
    if stack.len() > 1 {
        let (name, metadata, entries) = stack.pop().expect("len > 1");
        stack.last_mut().expect("root").2.push(TraceEntry::Scope {
            name,
            metadata,
            entries,
        });
    }
}

thread_local! {
    static TRACE: RefCell<Option<Collector>> = const { RefCell::new(None) };
    /// How many recomputations run on this thread: nothing is recorded
    /// while one does (rule D1).
    static PAUSED: Cell<u32> = const { Cell::new(0) };
}

/// Pauses recording on this thread until dropped: what a recomputation
/// runs is never recorded (rule D1), nested checkpoints' forwards included.
pub(crate) struct Paused(());

pub(crate) fn pause() -> Paused {
    PAUSED.with(|p| p.set(p.get() + 1));
    Paused(())
}

impl Drop for Paused {
    fn drop(&mut self) {
        PAUSED.with(|p| p.set(p.get().saturating_sub(1)));
    }
}

fn paused() -> bool {
    PAUSED.with(Cell::get) > 0
}

/// Runs `f` and returns what it traced on this thread.
///
/// Only regions inside a checkpoint's forward are recorded: not plain calls
/// outside checkpoints, not replay.
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::collect_trace, region, Policy, diagnostics::TraceEntry};
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let (sum, trace) = collect_trace(|| {
///     let a = region("outside", Policy::Save).call(&x, |x| x * 2); // a plain call
///     let y = checkpoint("c").call(&a, |a| region("sin", Policy::Recompute).call(&a, |a| a.sin()));
///     let sum = y.sum(tch::Kind::Float);
///     sum.backward(); // replays `sin`
///     sum
/// });
/// assert!(sum.defined());
/// assert_eq!(trace.entries, [TraceEntry::Region { name: "sin".into(), policy: Policy::Recompute }]);
/// ```
pub fn collect_trace<R>(f: impl FnOnce() -> R) -> (R, Trace) {
    let previous = TRACE.with(|t| {
        t.borrow_mut().replace(Collector {
            stack: vec![(String::new(), None, Vec::new())],
        })
    });
    struct Restore(Option<Option<Collector>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(previous) = self.0.take() {
                TRACE.with(|t| *t.borrow_mut() = previous);
            }
        }
    }
    let mut restore = Restore(Some(previous));
    let out = f();
    let collected =
        TRACE.with(|t| std::mem::replace(&mut *t.borrow_mut(), restore.0.take().flatten()));
    let mut stack = collected.map(|c| c.stack).unwrap_or_default();
    // Scopes left open (a panic inside one was caught) are closed here.
    while stack.len() > 1 {
        close_top(&mut stack);
    }
    let entries = stack.pop().map(|(_, _, e)| e).unwrap_or_default();
    (out, Trace { entries })
}

/// Runs `f` inside a named scope of the trace (reporting only).
///
/// ```
/// let y = remat_runtime::diagnostics::trace_scope("embeddings", || 1 + 1);
/// assert_eq!(y, 2);
/// ```
pub fn trace_scope<R>(name: impl Into<Cow<'static, str>>, f: impl FnOnce() -> R) -> R {
    let _scope = enter_scope(name);
    f()
}

/// [`trace_scope`] with metadata, shown in brackets after the scope's name
/// (`attention [heads=4]`). The metadata is formatted only while a trace is
/// being collected.
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::collect_trace, region, diagnostics::trace_scope_with, Policy};
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let heads = 4;
/// let (_, trace) = collect_trace(|| {
///     trace_scope_with("attention", || format!("heads={heads}"), || {
///         checkpoint("c").call(&x, |x| region("core", Policy::Save).call(&x, |x| x.sin()))
///     })
/// });
/// assert_eq!(trace.to_string(), "remat trace\n  attention [heads=4]\n    core: save\n");
/// ```
pub fn trace_scope_with<R>(
    name: impl Into<Cow<'static, str>>,
    metadata: impl FnOnce() -> String,
    f: impl FnOnce() -> R,
) -> R {
    let _scope = enter_scope_with(name, metadata);
    f()
}

/// Closes the scope it opened when dropped (see [`enter_scope`]).
///
/// ```
/// use remat_runtime::{diagnostics::collect_trace, diagnostics::enter_scope};
/// let ((), trace) = collect_trace(|| {
///     let _outer = enter_scope("outer");
///     {
///         let _inner = enter_scope("inner");
///     } // `inner` closes here
///     let _sibling = enter_scope("sibling");
/// });
/// assert_eq!(trace.to_string(), "remat trace\n  outer\n    inner\n    sibling\n");
/// ```
#[must_use = "the scope closes when the guard is dropped"]
pub struct ScopeGuard {
    open: bool,
}

/// Opens a trace scope until the guard is dropped; what the `scope` statement
/// of `remat!` uses.
///
/// ```
/// let _g = remat_runtime::diagnostics::enter_scope("attention block");
/// ```
pub fn enter_scope(name: impl Into<Cow<'static, str>>) -> ScopeGuard {
    open_scope(name, None::<fn() -> String>)
}

/// [`enter_scope`] with metadata (see [`trace_scope_with`]).
///
/// ```
/// use remat_runtime::{diagnostics::collect_trace, diagnostics::enter_scope_with};
/// let ((), trace) = collect_trace(|| {
///     let _layer = enter_scope_with("layer", || "3 of 12".to_string());
/// });
/// assert_eq!(trace.to_string(), "remat trace\n  layer [3 of 12]\n");
/// ```
pub fn enter_scope_with(
    name: impl Into<Cow<'static, str>>,
    metadata: impl FnOnce() -> String,
) -> ScopeGuard {
    open_scope(name, Some(metadata))
}

fn open_scope(
    name: impl Into<Cow<'static, str>>,
    metadata: Option<impl FnOnce() -> String>,
) -> ScopeGuard {
    if paused() || TRACE.with(|t| t.borrow().is_none()) {
        return ScopeGuard { open: false };
    }
    // Formatted outside the borrow: the closure may run user code.
    let metadata = metadata.map(|m| m());
    let open = TRACE.with(|t| match &mut *t.borrow_mut() {
        Some(c) => {
            c.stack
                .push((name.into().into_owned(), metadata, Vec::new()));
            true
        }
        None => false,
    });
    ScopeGuard { open }
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        TRACE.with(|t| {
            if let Some(c) = &mut *t.borrow_mut() {
                close_top(&mut c.stack);
            }
        });
    }
}

/// Records a region reached on a forward, if a trace is being collected.
pub(crate) fn record_region(name: &str, policy: Policy) {
    if paused() {
        return;
    }
    TRACE.with(|t| {
        if let Some(c) = &mut *t.borrow_mut() {
            if let Some(top) = c.stack.last_mut() {
                top.2.push(TraceEntry::Region {
                    name: name.to_string(),
                    policy,
                });
            }
        }
    });
}
