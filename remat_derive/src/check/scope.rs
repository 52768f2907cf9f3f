//! Locals and the scopes that name them.
//!
//! Resolution follows Rust's: each `let` makes a new local, so shadowing is
//! exact, and a name means the innermost local of that name in scope.
//! Locals outlive their scopes, since the IR refers to them by id after the
//! name is gone. Invariant: the outermost scope, the checked code's own, is
//! never popped, so there is always one to declare in.

use std::collections::HashMap;

use crate::check::ir::LocalId;

/// What a local holds, as far as `needs` is concerned.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A tensor parameter of the checkpoint, which replay gets back as it was.
    Input,
    /// The output of the `recompute` region of this name, which replay
    /// recomputes.
    Recomputed(String),
    /// Anything else, `save` outputs included.
    Plain,
}

pub(crate) struct Scopes {
    scopes: Vec<HashMap<String, LocalId>>,
    /// By local id.
    kinds: Vec<Kind>,
}

impl Default for Scopes {
    fn default() -> Self {
        Scopes {
            scopes: vec![HashMap::new()],
            kinds: Vec::new(),
        }
    }
}

impl Scopes {
    pub(crate) fn push(&mut self) {
        self.scopes.push(HashMap::new());
    }

    pub(crate) fn pop(&mut self) {
        if self.scopes.len() > 1 {
            self.scopes.pop();
        }
    }

    pub(crate) fn resolve(&self, name: &str) -> Option<LocalId> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// The names of the innermost scope.
    pub(crate) fn innermost(&self) -> HashMap<String, LocalId> {
        self.scopes.last().cloned().unwrap_or_default()
    }

    /// What `name` means outside the innermost scope.
    pub(crate) fn resolve_outside(&self, name: &str) -> Option<LocalId> {
        let outer = &self.scopes[..self.scopes.len().saturating_sub(1)];
        outer.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// A local that no name refers to (a temporary).
    pub(crate) fn new_local(&mut self, kind: Kind) -> LocalId {
        self.kinds.push(kind);
        self.kinds.len() - 1
    }

    pub(crate) fn declare(&mut self, name: &str, kind: Kind) -> LocalId {
        let id = self.new_local(kind);
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_owned(), id);
        }
        id
    }

    /// Declares `name` in the outermost scope, where a standalone block's
    /// locals from outside it belong: it is first seen deep inside, but
    /// stays visible to the rest of the block.
    pub(crate) fn declare_outermost(&mut self, name: String, kind: Kind) -> LocalId {
        let id = self.new_local(kind);
        if let Some(scope) = self.scopes.first_mut() {
            scope.insert(name, id);
        }
        id
    }

    pub(crate) fn kind(&self, local: LocalId) -> &Kind {
        &self.kinds[local]
    }

    pub(crate) fn set_kind(&mut self, local: LocalId, kind: Kind) {
        self.kinds[local] = kind;
    }

    /// A name in scope close to `name` (one edit away), for suggestions;
    /// the first in alphabetical order, so that messages are stable.
    pub(crate) fn similar(&self, name: &str) -> Option<String> {
        let mut names: Vec<&String> = self.scopes.iter().flat_map(|s| s.keys()).collect();
        names.sort();
        names
            .into_iter()
            .find(|candidate| name.len() > 2 && edit_distance(candidate, name) <= 1)
            .cloned()
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
