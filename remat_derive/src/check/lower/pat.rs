//! Lowering patterns: binding each name of a pattern to the part of the
//! value it matches (`let (a, b) = ..`, `Some(x)`, `S { t, .. }`), and
//! naming the parts of a fresh `save` output for messages.

use syn::Pat;

use super::Lower;
use crate::check::ir::{Node, Operand, Proj, SiteId};
use crate::check::place::member;
use crate::check::scope::Kind;
use crate::check::vocab::is_wrapping_pattern;

impl Lower {
    /// Declares a parameter of the checkpoint function: a tensor parameter
    /// is an input, which replay reproduces.
    pub(crate) fn param(&mut self, pat: &Pat, tensor: bool) {
        let kind = if tensor { Kind::Input } else { Kind::Plain };
        self.bind_pat(pat, Operand::Other, &kind);
    }

    /// Binds the names of `pat` to the parts of `op`.
    pub(super) fn bind_pat(&mut self, pat: &Pat, op: Operand, kind: &Kind) {
        match pat {
            Pat::Ident(p) => {
                if let Some((_, sub)) = &p.subpat {
                    self.bind_pat(sub, op.clone(), kind);
                }
                let id = self.scopes.declare(&p.ident.to_string(), kind.clone());
                if p.by_ref.is_some() && p.mutability.is_some() {
                    self.ref_mut_binding(id, &op);
                }
                self.emit(Node::Assign {
                    local: id,
                    projs: Vec::new(),
                    value: op,
                    weak: false,
                });
            }
            Pat::Type(p) => self.bind_pat(&p.pat, op, kind),
            Pat::Reference(p) => self.bind_pat(&p.pat, op, kind),
            Pat::Paren(p) => self.bind_pat(&p.pat, op, kind),
            Pat::Tuple(t) => {
                self.bind_elems(t.elems.iter(), op, kind, |i| Proj::Field(i.to_string()))
            }
            Pat::Slice(t) => {
                self.bind_elems(t.elems.iter(), op, kind, |i| Proj::Index(Some(i as u32)))
            }
            Pat::TupleStruct(t) => {
                let transparent = t
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| is_wrapping_pattern(&s.ident.to_string()))
                    && t.elems.len() == 1;
                if transparent {
                    self.bind_pat(&t.elems[0], op, kind);
                } else {
                    self.bind_elems(t.elems.iter(), op, kind, |i| Proj::Field(i.to_string()));
                }
            }
            Pat::Struct(s) => {
                for field in &s.fields {
                    let part = op.clone().project(Proj::Field(member(&field.member)));
                    self.bind_pat(&field.pat, part, kind);
                }
            }
            Pat::Or(o) => {
                for case in &o.cases {
                    self.bind_pat(case, op.clone().project(Proj::Index(None)), kind);
                }
            }
            _ => {}
        }
    }

    /// Binds the elements of a tuple or slice pattern, each to the part at
    /// `proj` of its position; past a `..`, positions count from the end,
    /// which is not known here: any element.
    fn bind_elems<'a>(
        &mut self,
        elems: impl Iterator<Item = &'a Pat>,
        op: Operand,
        kind: &Kind,
        proj: impl Fn(usize) -> Proj,
    ) {
        let mut after_rest = false;
        for (i, elem) in elems.enumerate() {
            if matches!(elem, Pat::Rest(_)) {
                after_rest = true;
                continue;
            }
            let p = if after_rest {
                Proj::Index(None)
            } else {
                proj(i)
            };
            self.bind_pat(elem, op.clone().project(p), kind);
        }
    }

    /// Names the parts of a fresh output for messages.
    pub(super) fn record_names(&mut self, site: SiteId, pat: &Pat, path: Vec<Proj>) {
        match pat {
            Pat::Ident(p) => self.sites[site].names.push((path, p.ident.to_string())),
            Pat::Type(p) => self.record_names(site, &p.pat, path),
            Pat::Reference(p) => self.record_names(site, &p.pat, path),
            Pat::Paren(p) => self.record_names(site, &p.pat, path),
            // A tuple's fields and a slice's elements project alike.
            Pat::Tuple(syn::PatTuple { elems, .. }) | Pat::Slice(syn::PatSlice { elems, .. }) => {
                for (i, elem) in elems.iter().enumerate() {
                    if matches!(elem, Pat::Rest(_)) {
                        break;
                    }
                    let mut path = path.clone();
                    path.push(Proj::Index(Some(i as u32)));
                    self.record_names(site, elem, path);
                }
            }
            _ => {}
        }
    }
}
