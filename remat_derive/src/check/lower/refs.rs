//! Places behind `&mut` references, and the locals a write may reach
//! (also after a `#[cfg]`'d `let`, `cfg`): a local bound to a mutable reference
//! aliases its target for writes, as a borrow checker models it. A write
//! through `r` (`r.t = a`, `*r = a`, `r[0] = a`) writes `r`'s own copy and
//! every place `r` may point to; where the target is only known to be
//! somewhere under a place (`cache.get_mut(i)`, `for e in &mut v`), every
//! place under it may now hold the value; where it cannot be known at all
//! (`&mut *helper()`), the write is a read (the value escapes), as storing
//! behind any other reference is (dsl.md X5, X13).
//!
//! While `r` is live, Rust forbids using its target any other way, so
//! writes to the target itself need no aliasing back to `r`.

use quote::ToTokens;
use syn::{Expr, Pat};

use super::Lower;
use crate::check::ir::{LocalId, Node, Operand, Proj, ReadKind};
use crate::check::place::{literal_index, member, place_text, plain_ident};

/// One place a reference may point to.
#[derive(Clone, Debug)]
pub(super) struct RefTarget {
    local: LocalId,
    projs: Vec<Proj>,
    /// Through an index: another element may be meant (a weak write).
    weak: bool,
    /// Somewhere under the place, not the place itself.
    smear: bool,
}

/// What a reference local points to.
#[derive(Clone, Debug)]
pub(super) enum Referent {
    Places(Vec<RefTarget>),
    /// A place the check cannot name.
    Unknown,
}

impl Referent {
    /// The same targets, anywhere under them (for the parts of a pattern,
    /// the elements of an iteration).
    fn smeared(self) -> Referent {
        match self {
            Referent::Places(ts) => Referent::Places(
                ts.into_iter()
                    .map(|t| RefTarget { smear: true, ..t })
                    .collect(),
            ),
            Referent::Unknown => Referent::Unknown,
        }
    }
}

/// Methods through which a reference passes unchanged.
fn passes_ref(method: &str) -> bool {
    matches!(method, "unwrap" | "expect" | "next" | "as_deref_mut")
}

impl Lower {
    /// What `expr` refers to, if the code shows it is a mutable reference:
    /// `&mut P`, a reference local, `P.get_mut(..)` and any `*_mut` method
    /// (and `.unwrap()` of them), a call given `&mut P`.
    pub(super) fn referent(&self, expr: &Expr) -> Option<Referent> {
        match expr {
            Expr::Paren(e) => self.referent(&e.expr),
            Expr::Group(e) => self.referent(&e.expr),
            Expr::Try(e) => self.referent(&e.expr),
            Expr::Reference(e) if e.mutability.is_some() => Some(
                self.place_of(&e.expr)
                    .map_or(Referent::Unknown, |(l, p, w)| self.expand(l, p, w, false)),
            ),
            Expr::Path(_) => {
                let id = self.scopes.resolve(&plain_ident(expr)?.to_string())?;
                self.refs.get(&id).cloned()
            }
            Expr::MethodCall(call) => {
                let method = call.method.to_string();
                if passes_ref(&method) {
                    return self.referent(&call.receiver);
                }
                if method.ends_with("_mut") {
                    return Some(
                        self.place_of(&call.receiver)
                            .map_or(Referent::Unknown, |(l, p, w)| self.expand(l, p, w, true)),
                    );
                }
                self.returned_ref(call.args.iter())
            }
            Expr::Call(call) => self.returned_ref(call.args.iter()),
            _ => None,
        }
    }

    /// A call given `&mut P` may return a reference into `P`: somewhere
    /// under each such argument (`None` when there is none).
    fn returned_ref<'a>(&self, args: impl Iterator<Item = &'a Expr>) -> Option<Referent> {
        let mut places = Vec::new();
        for arg in args {
            match self.referent(arg) {
                Some(Referent::Places(ts)) => places.extend(ts),
                Some(Referent::Unknown) => return Some(Referent::Unknown),
                None => {}
            }
        }
        (!places.is_empty()).then(|| Referent::Places(places).smeared())
    }

    /// The place an expression names, without reads (its index
    /// expressions are read where the expression is lowered).
    fn place_of(&self, expr: &Expr) -> Option<(LocalId, Vec<Proj>, bool)> {
        match expr {
            Expr::Paren(e) => self.place_of(&e.expr),
            Expr::Group(e) => self.place_of(&e.expr),
            Expr::Reference(e) => self.place_of(&e.expr),
            Expr::Unary(e) if matches!(e.op, syn::UnOp::Deref(_)) => self.place_of(&e.expr),
            Expr::Path(_) => {
                let id = self.scopes.resolve(&plain_ident(expr)?.to_string())?;
                Some((id, Vec::new(), false))
            }
            Expr::Field(e) => {
                let (id, mut projs, weak) = self.place_of(&e.base)?;
                projs.push(Proj::Field(member(&e.member)));
                Some((id, projs, weak))
            }
            Expr::Index(e) => {
                let (id, mut projs, _) = self.place_of(&e.expr)?;
                projs.push(Proj::Index(literal_index(&e.index)));
                Some((id, projs, true))
            }
            _ => None,
        }
    }

    /// The place `local.projs` and, when `local` is itself a reference,
    /// what it points to at `projs`.
    fn expand(&self, local: LocalId, projs: Vec<Proj>, weak: bool, smear: bool) -> Referent {
        let mut targets = Vec::new();
        match self.refs.get(&local) {
            Some(Referent::Unknown) => return Referent::Unknown,
            Some(Referent::Places(ts)) => {
                for t in ts {
                    // Anywhere under a place stays anywhere under it.
                    let mut p = t.projs.clone();
                    if !t.smear {
                        p.extend(projs.iter().cloned());
                    }
                    targets.push(RefTarget {
                        local: t.local,
                        projs: p,
                        weak: weak || t.weak,
                        smear: smear || t.smear,
                    });
                }
            }
            None => {}
        }
        targets.push(RefTarget {
            local,
            projs,
            weak,
            smear,
        });
        Referent::Places(targets)
    }

    /// After `pat` was bound to a reference: a plain name is the reference
    /// (`exact`), the names inside a pattern point somewhere under it.
    pub(super) fn bind_refs(&mut self, pat: &Pat, referent: Referent, exact: bool) {
        match pat {
            Pat::Ident(p) if p.subpat.is_none() => {
                if let Some(id) = self.scopes.resolve(&p.ident.to_string()) {
                    let r = if exact { referent } else { referent.smeared() };
                    self.refs.insert(id, r);
                }
            }
            Pat::Type(p) => self.bind_refs(&p.pat, referent, exact),
            Pat::Paren(p) => self.bind_refs(&p.pat, referent, exact),
            _ => {
                for name in pat_names(pat) {
                    if let Some(id) = self.scopes.resolve(&name) {
                        self.refs.insert(id, referent.clone().smeared());
                    }
                }
            }
        }
    }

    /// `ref mut x` in a pattern matching the place `op`.
    pub(super) fn ref_mut_binding(&mut self, id: LocalId, op: &Operand) {
        let referent = match op {
            Operand::Place(local, projs) => {
                let weak = projs.iter().any(|p| matches!(p, Proj::Index(_)));
                self.expand(*local, projs.clone(), weak, false)
            }
            _ => Referent::Unknown,
        };
        self.refs.insert(id, referent);
    }

    /// `local.projs = value` (through a `*` when `deref`), where `right`
    /// is the code of the value.
    pub(super) fn write(
        &mut self,
        (local, projs, weak, deref): (LocalId, Vec<Proj>, bool, bool),
        value: Operand,
        right: &Expr,
    ) {
        let through = deref || !projs.is_empty();
        let referent = if through {
            self.refs.get(&local).cloned()
        } else {
            // `r = &mut t`: `r` now points elsewhere.
            match self.referent(right) {
                Some(r) => self.refs.insert(local, r),
                None => self.refs.remove(&local),
            };
            None
        };
        if deref && referent.is_none() {
            // Behind a reference the check does not know: the value escapes.
            self.escape(value, right);
            return;
        }
        let targets = match referent {
            Some(Referent::Unknown) => {
                self.escape(value.clone(), right);
                Vec::new()
            }
            Some(Referent::Places(ts)) => ts,
            None => Vec::new(),
        };
        let many = targets.len() > 1;
        for t in targets {
            let mut p = t.projs;
            if !t.smear {
                p.extend(projs.iter().cloned());
            }
            let node = if t.smear {
                Node::Smear {
                    local: t.local,
                    projs: p,
                    value: value.clone(),
                }
            } else {
                Node::Assign {
                    local: t.local,
                    projs: p,
                    value: value.clone(),
                    weak: weak || t.weak || many,
                }
            };
            self.emit(node);
        }
        // A name a `#[cfg]`'d `let` may or may not have bound: the write
        // may reach either local.
        let mut alternates = self.alternates.get(&local).cloned().unwrap_or_default();
        while let Some(alt) = alternates.pop() {
            if let Some(more) = self.alternates.get(&alt) {
                alternates.extend(more.iter().copied());
            }
            self.emit(Node::Assign {
                local: alt,
                projs: projs.clone(),
                value: value.clone(),
                weak: true,
            });
        }
        self.emit(Node::Assign {
            local,
            projs,
            value,
            weak,
        });
    }

    /// `joined` is `new` on one path and `old` on another (a `#[cfg]`'d
    /// binding): it points to what either points to, and runs the regions
    /// of either closure.
    pub(super) fn alias_locals(&mut self, joined: LocalId, new: LocalId, old: Option<LocalId>) {
        let ids: Vec<LocalId> = std::iter::once(new).chain(old).collect();
        let sites: Vec<Vec<usize>> = ids
            .iter()
            .filter_map(|id| self.closure_sites.get(id).cloned())
            .collect();
        if !sites.is_empty() {
            let mut all: Vec<usize> = sites.into_iter().flatten().collect();
            all.sort_unstable();
            all.dedup();
            self.closure_sites.insert(joined, all);
        }
        let referents: Vec<Referent> = ids
            .iter()
            .filter_map(|id| self.refs.get(id).cloned())
            .collect();
        if referents.is_empty() {
            return;
        }
        let mut places = Vec::new();
        for r in referents {
            match r {
                Referent::Places(ts) => places.extend(ts),
                Referent::Unknown => {
                    self.refs.insert(joined, Referent::Unknown);
                    return;
                }
            }
        }
        self.refs.insert(joined, Referent::Places(places));
    }

    /// A value stored where the check cannot follow it: a read.
    pub(super) fn escape(&mut self, value: Operand, right: &Expr) {
        if !matches!(value, Operand::Other | Operand::Nothing) {
            let var = place_text(right);
            self.read(value, right.to_token_stream(), var, ReadKind::Bare);
        }
    }
}

/// The names a pattern binds.
fn pat_names(pat: &Pat) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![pat];
    while let Some(pat) = stack.pop() {
        match pat {
            Pat::Ident(p) => {
                out.push(p.ident.to_string());
                if let Some((_, sub)) = &p.subpat {
                    stack.push(sub);
                }
            }
            Pat::Type(p) => stack.push(&p.pat),
            Pat::Reference(p) => stack.push(&p.pat),
            Pat::Paren(p) => stack.push(&p.pat),
            Pat::Tuple(t) => stack.extend(t.elems.iter()),
            Pat::Slice(t) => stack.extend(t.elems.iter()),
            Pat::TupleStruct(t) => stack.extend(t.elems.iter()),
            Pat::Struct(s) => stack.extend(s.fields.iter().map(|f| &*f.pat)),
            Pat::Or(o) => stack.extend(o.cases.iter()),
            _ => {}
        }
    }
    out
}
