//! Lowering expressions to the operand their value may carry and the reads
//! they perform, and assignments to the places they write. The walk is
//! recursive but bounded: past `MAX_DEPTH` nested expressions it stops with
//! an error, since a proc macro cannot grow its stack.

use quote::ToTokens;
use syn::Expr;

use super::Lower;
use crate::ast::{Invocation, Mode};
use crate::check::ir::{LocalId, Node, Operand, Proj};
use crate::check::place::{literal_index, member, place_text, plain_ident, strip};
use crate::check::report;
use crate::check::scope::Kind;
use crate::check::vocab::{
    is_compound, is_constructor, is_iteration, is_metadata, is_split_view, is_view,
    is_wrapping_call,
};

/// The deepest expression nesting the check lowers.
const MAX_DEPTH: usize = 256;

impl Lower {
    /// Lowers `expr`, emitting the reads it performs, and returns what its
    /// value may carry.
    pub(super) fn value(&mut self, expr: &Expr) -> Operand {
        if self.depth >= MAX_DEPTH {
            if !self.too_deep {
                self.too_deep = true;
                let span = syn::spanned::Spanned::span(expr);
                self.error(report::too_deep(span, MAX_DEPTH));
            }
            return Operand::Other;
        }
        self.depth += 1;
        let op = self.value_inner(expr);
        self.depth -= 1;
        op
    }

    fn value_inner(&mut self, expr: &Expr) -> Operand {
        match expr {
            Expr::Path(_) => {
                match plain_ident(expr).and_then(|i| self.scopes.resolve(&i.to_string())) {
                    Some(id) => Operand::Place(id, Vec::new()),
                    None => Operand::Other,
                }
            }
            Expr::Paren(e) => self.value(&e.expr),
            Expr::Group(e) => self.value(&e.expr),
            Expr::Reference(e) => self.value(&e.expr),
            Expr::Unary(e) if matches!(e.op, syn::UnOp::Deref(_)) => self.value(&e.expr),
            Expr::Unary(e) => {
                self.read_expr(&e.expr);
                Operand::Other
            }
            Expr::Field(e) => {
                let base = self.value(&e.base);
                base.project(Proj::Field(member(&e.member)))
            }
            Expr::Index(e) => {
                let index = literal_index(&e.index);
                if index.is_none() {
                    self.read_expr(&e.index);
                }
                let base = self.value(&e.expr);
                base.project(Proj::Index(index))
            }
            Expr::MethodCall(call) => {
                let method = &call.method;
                if is_view(method, &call.args) || is_metadata(method) {
                    for arg in &call.args {
                        self.read_expr(arg);
                    }
                    let receiver = self.value(&call.receiver);
                    return if is_metadata(method) {
                        Operand::Other
                    } else if is_split_view(method) {
                        receiver.project(Proj::Split)
                    } else {
                        receiver
                    };
                }
                if is_iteration(method) && call.args.is_empty() {
                    return self.value(&call.receiver);
                }
                self.read_expr(&call.receiver);
                self.call_args(call.args.iter())
            }
            Expr::Call(call) => self.call_value(call),
            Expr::Tuple(t) => Operand::Parts(
                t.elems
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (Proj::Field(i.to_string()), self.value(e)))
                    .collect(),
            ),
            Expr::Array(a) => Operand::Parts(
                a.elems
                    .iter()
                    .map(|e| (Proj::Index(None), self.value(e)))
                    .collect(),
            ),
            Expr::Repeat(r) => {
                self.read_expr(&r.len);
                Operand::Parts(vec![(Proj::Index(None), self.value(&r.expr))])
            }
            Expr::Struct(s) => {
                let fields: Vec<(Proj, Operand)> = s
                    .fields
                    .iter()
                    .map(|f| (Proj::Field(member(&f.member)), self.value(&f.expr)))
                    .collect();
                // `..base` moves the other fields of `base`: not a read.
                match &s.rest {
                    Some(rest) => Operand::Update(Box::new(self.value(rest)), fields),
                    None => Operand::Parts(fields),
                }
            }
            Expr::Macro(m) => self.macro_value(&m.mac, false),
            Expr::Block(b) => match &b.label {
                Some(label) => self.labelled_block_value(label, &b.block),
                None => self.block_value(&b.block),
            },
            Expr::Unsafe(b) => self.block_value(&b.block),
            Expr::If(e) => self.if_value(e),
            Expr::Match(e) => self.match_value(e),
            Expr::Closure(c) => self.closure_value(c),
            Expr::ForLoop(e) => self.for_value(e),
            Expr::While(e) => self.while_value(e),
            Expr::Loop(e) => self.loop_value(e),
            Expr::Assign(e) => {
                self.assign(&e.left, &e.right);
                Operand::Other
            }
            Expr::Binary(e) => {
                self.read_expr(&e.left);
                self.read_expr(&e.right);
                if is_compound(&e.op) {
                    if let Some(place) = self.place(&e.left) {
                        self.write(place, Operand::Other, &e.right);
                    }
                }
                Operand::Other
            }
            Expr::Let(e) => {
                let referent = self.referent(&e.expr);
                let op = self.value(&e.expr);
                self.bind_pat(&e.pat, op, &Kind::Plain);
                if let Some(r) = referent {
                    self.bind_refs(&e.pat, r, true);
                }
                Operand::Other
            }
            Expr::Return(e) => {
                self.returned(e.expr.as_deref());
                Operand::Other
            }
            Expr::Break(e) => {
                self.break_value(e);
                Operand::Other
            }
            Expr::Continue(e) => {
                let label = e.label.as_ref().map(|l| l.ident.to_string());
                self.emit(Node::Continue(label));
                Operand::Other
            }
            Expr::Try(e) => self.value(&e.expr),
            Expr::Cast(e) => {
                self.read_expr(&e.expr);
                Operand::Other
            }
            Expr::Range(e) => {
                if let Some(start) = &e.start {
                    self.read_expr(start);
                }
                if let Some(end) = &e.end {
                    self.read_expr(end);
                }
                Operand::Other
            }
            Expr::Lit(_) | Expr::Infer(_) => Operand::Other,
            Expr::Await(e) => {
                self.read_expr(&e.base);
                Operand::Other
            }
            other => {
                // Anything else (async and try blocks, verbatim tokens...):
                // every local it names is read.
                self.scan_tokens(other.to_token_stream());
                Operand::Other
            }
        }
    }

    /// A call that is not a region: a wrapping constructor carries its
    /// argument; calling a closure bound to a local runs its regions again.
    fn call_value(&mut self, call: &syn::ExprCall) -> Operand {
        if let Expr::Path(p) = &*call.func {
            let last = p.path.segments.last().map(|s| s.ident.to_string());
            if call.args.len() == 1 && last.as_deref().is_some_and(is_wrapping_call) {
                return self.value(&call.args[0]);
            }
            // `P(a, b)`: a tuple struct or variant, by Rust's naming
            // convention (functions are snake case), built in place.
            let local = plain_ident(&call.func).and_then(|i| self.scopes.resolve(&i.to_string()));
            if local.is_none() && last.as_deref().is_some_and(is_constructor) {
                return Operand::Parts(
                    call.args
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (Proj::Field(i.to_string()), self.value(e)))
                        .collect(),
                );
            }
        }
        if let Some(id) = plain_ident(&call.func).and_then(|i| self.scopes.resolve(&i.to_string()))
        {
            // A closure bound to a local: its regions run again.
            let sites = self.closure_sites.get(&id).cloned().unwrap_or_default();
            let args = self.call_args(call.args.iter());
            for site in &sites {
                self.emit(Node::Def(*site));
            }
            let result = Operand::Refresh(Box::new(Operand::Place(id, Vec::new())), sites);
            return if self.closure_sites.contains_key(&id) {
                result
            } else {
                Operand::Union(vec![args, result])
            };
        }
        if !matches!(&*call.func, Expr::Path(_)) {
            self.read_expr(&call.func);
        }
        self.call_args(call.args.iter())
    }

    /// The arguments of a call that is not a region: read, except closures,
    /// whose results may come back in the call's result.
    pub(super) fn call_args<'a>(&mut self, args: impl Iterator<Item = &'a Expr>) -> Operand {
        let mut results = vec![Operand::Other];
        for arg in args {
            if let Expr::Closure(c) = strip(arg) {
                results.push(self.closure_value(c));
            } else {
                self.read_expr(arg);
            }
        }
        Operand::Union(results)
    }

    /// `left = right`.
    fn assign(&mut self, left: &Expr, right: &Expr) {
        if let Expr::Tuple(t) = strip(left) {
            let op = self.value(right);
            // `(a, b) = save ..`: the names of the elements, for messages.
            if let Operand::Fresh(site) = &op {
                for (i, elem) in t.elems.iter().enumerate() {
                    if let Some(text) = place_text(elem) {
                        let path = vec![Proj::Field(i.to_string())];
                        self.sites[*site].names.push((path, text));
                    }
                }
            }
            for (i, elem) in t.elems.iter().enumerate() {
                let part = op.clone().project(Proj::Field(i.to_string()));
                self.assign_op(elem, part, right);
            }
            return;
        }
        let parsed = self.remat_expr(right);
        let op = match parsed.as_ref().map(|p| &p.invocation) {
            Some(Invocation::Expr(region)) => {
                let op = self.region(region);
                if let (Operand::Fresh(site), Some(text)) = (&op, place_text(left)) {
                    self.sites[*site].names.push((Vec::new(), text));
                }
                op
            }
            _ => self.value(right),
        };
        self.assign_op(left, op, right);
    }

    fn assign_op(&mut self, left: &Expr, op: Operand, right: &Expr) {
        if matches!(strip(left), Expr::Infer(_)) {
            return;
        }
        match self.place(left) {
            Some(place) => {
                // The whole local is overwritten: no longer an input or a
                // `recompute` output, for `needs`.
                if place.1.is_empty() && !place.3 {
                    self.scopes.set_kind(place.0, Kind::Plain);
                }
                self.write(place, op, right);
            }
            // Stored where the check cannot follow: a read.
            None => self.escape(op, right),
        }
    }

    /// The place an assignment writes: a local, its fields and indexes,
    /// whether the write is weak (through an index: the old contents may
    /// stay), and whether it goes through a `*`.
    fn place(&mut self, expr: &Expr) -> Option<(LocalId, Vec<Proj>, bool, bool)> {
        match expr {
            Expr::Paren(e) => self.place(&e.expr),
            Expr::Group(e) => self.place(&e.expr),
            Expr::Unary(e) if matches!(e.op, syn::UnOp::Deref(_)) => {
                let (id, projs, weak, _) = self.place(&e.expr)?;
                Some((id, projs, weak, true))
            }
            Expr::Path(_) => {
                let ident = plain_ident(expr)?.to_string();
                match self.scopes.resolve(&ident) {
                    Some(id) => Some((id, Vec::new(), false, false)),
                    // In a standalone block, a local from outside.
                    None if self.mode == Mode::Block && ident != "self" => Some((
                        self.scopes.declare_outermost(ident, Kind::Plain),
                        Vec::new(),
                        false,
                        false,
                    )),
                    None => None,
                }
            }
            Expr::Field(e) => {
                let (id, mut projs, weak, deref) = self.place(&e.base)?;
                projs.push(Proj::Field(member(&e.member)));
                Some((id, projs, weak, deref))
            }
            Expr::Index(e) => {
                let index = literal_index(&e.index);
                if index.is_none() {
                    self.read_expr(&e.index);
                }
                let (id, mut projs, _, deref) = self.place(&e.expr)?;
                projs.push(Proj::Index(index));
                Some((id, projs, true, deref))
            }
            _ => None,
        }
    }
}
