//! Statements under `#[cfg(..)]`. A proc macro cannot evaluate a cfg
//! predicate, so each cfg'd statement is an alternative: compiled in or
//! not, on separate paths that join after it (dsl.md X14). That covers
//! every combination rustc may compile, mutually exclusive ones
//! (`cfg(p)`/`cfg(not(p))`) included, at the price of some combinations
//! that cannot happen. A name the statement binds means, after it, its new
//! local on one path and what the name meant before (or nothing) on the
//! other, so that a removed `let` does not shadow; a write to the name
//! reaches both (weakly: either may be meant). Region names of cfg'd
//! statements may repeat between them (only one may be compiled in), not
//! with the other statements'.

use super::Lower;
use crate::check::ir::{Node, Operand};
use crate::check::scope::Kind;

impl Lower {
    /// Lowers a statement by `f`, as an alternative when `cfg`.
    pub(super) fn maybe_cfg(&mut self, cfg: bool, f: impl FnOnce(&mut Self)) {
        if !cfg {
            f(self);
            return;
        }
        let names_before = self.scopes.innermost();
        let regions_before = self.region_names.clone();
        let base = regions_before.without(&self.cfg_names);
        self.region_names = base.clone();
        let mut present = self.nodes(f);
        let inside = std::mem::replace(&mut self.region_names, regions_before);
        let added = inside.without(&base);
        self.cfg_names.join(added.clone());
        self.region_names.join(added);
        let mut absent = Vec::new();
        let mut bound: Vec<(String, usize)> = self
            .scopes
            .innermost()
            .into_iter()
            .filter(|(name, id)| names_before.get(name) != Some(id))
            .collect();
        bound.sort();
        for (name, new) in bound {
            let old = names_before
                .get(&name)
                .copied()
                .or_else(|| self.scopes.resolve_outside(&name));
            let kind = match old {
                Some(old) if self.scopes.kind(old) != self.scopes.kind(new) => Kind::Plain,
                _ => self.scopes.kind(new).clone(),
            };
            let joined = self.scopes.declare(&name, kind);
            self.alias_locals(joined, new, old);
            self.alternates
                .insert(joined, std::iter::once(new).chain(old).collect());
            present.push(Node::Assign {
                local: joined,
                projs: Vec::new(),
                value: Operand::Place(new, Vec::new()),
                weak: false,
            });
            absent.push(Node::Assign {
                local: joined,
                projs: Vec::new(),
                value: old.map_or(Operand::Nothing, |o| Operand::Place(o, Vec::new())),
                weak: false,
            });
        }
        self.emit(Node::Branch(vec![present, absent]));
    }
}
