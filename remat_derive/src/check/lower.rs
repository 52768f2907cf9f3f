//! Lowering: syn's tree of a checkpoint body (and `remat!`'s statements) to
//! the check's IR.
//!
//! Name resolution follows Rust's scopes: each `let` makes a new local, so
//! shadowing is exact. Expressions are lowered to the operand their value
//! may carry (a place, a view of one, a fresh `save` output, a tuple or
//! array of those, one of several after a branch) and to the reads they
//! perform on the way: every use that is not one of the allowed forms of
//! dsl.md is a read. The walk is recursive but bounded: past `MAX_DEPTH`
//! nested expressions it stops with an error.

use std::collections::HashMap;
use std::rc::Rc;

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Lit, LitStr, Macro, Pat, Token};

use crate::ast::{self, compact, Call, Invocation, Mode, Name, PolicyKind, Region};
use crate::check::ir::{Body, LocalId, Node, Operand, Proj, Read, ReadKind, Site, SiteId};
use crate::check::report;
use crate::preparsed::{Parsed, Table};
use crate::unchecked_attr;

/// The deepest expression nesting the check lowers.
pub(crate) const MAX_DEPTH: usize = 256;

#[derive(Clone)]
enum Kind {
    Input,
    Recomputed(String),
    Plain,
}

struct Local {
    kind: Kind,
}

struct Closure {
    label: String,
    result: LocalId,
}

pub(crate) struct Lower {
    mode: Mode,
    out: Vec<Vec<Node>>,
    scopes: Vec<HashMap<String, LocalId>>,
    locals: Vec<Local>,
    sites: Vec<Site>,
    /// Sites created inside each closure being lowered.
    collect: Vec<Vec<SiteId>>,
    /// Locals bound to a closure: the sites its body runs.
    closure_sites: HashMap<LocalId, Vec<SiteId>>,
    closures: Vec<Closure>,
    closure_count: usize,
    seq: usize,
    errors: Vec<(usize, syn::Error)>,
    /// Static region names seen on the current path (duplicates).
    seen: HashMap<String, Span>,
    loops: usize,
    /// Depth of `#[remat(unchecked)]` statements and forward-only code.
    unchecked: usize,
    /// Depth of forward-only code, where `needs` is not counted.
    forward_only: usize,
    /// `macro_rules!` defined in the body: name → definition.
    macros: HashMap<String, TokenStream>,
    /// A macro in statement position that may bind names the check
    /// cannot see.
    opaque_macro: bool,
    depth: usize,
    too_deep: bool,
    /// The body's `remat!` invocations, shared with the expansion.
    preparsed: Rc<Table>,
}

/// Pure view methods of `Tensor` (rule 2). In-place variants (`squeeze_`)
/// are not views.
pub(crate) fn is_view(method: &Ident) -> bool {
    let name = method.to_string();
    if name.ends_with('_') {
        return false;
    }
    matches!(
        name.as_str(),
        "view"
            | "view_as"
            | "narrow"
            | "select"
            | "slice"
            | "transpose"
            | "tr"
            | "permute"
            | "unsqueeze"
            | "chunk"
            | "split"
            | "unbind"
            | "i"
            | "shallow_clone"
            | "detach"
            | "alias"
    ) || name.starts_with("squeeze")
        || name.starts_with("expand")
}

/// Metadata reads, which work on a placeholder (rule 3).
fn is_metadata(method: &Ident) -> bool {
    let name = method.to_string();
    let sized = name
        .strip_prefix("size")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit()));
    sized
        || matches!(
            name.as_str(),
            "dim" | "kind" | "device" | "numel" | "requires_grad" | "is_contiguous" | "stride"
        )
}

#[derive(PartialEq, Eq)]
enum Guard {
    ForwardOnly,
    ReplayOnly,
}

fn recomputing_guard(cond: &Expr) -> Option<Guard> {
    match cond {
        Expr::Paren(e) => recomputing_guard(&e.expr),
        Expr::Group(e) => recomputing_guard(&e.expr),
        Expr::Unary(e) if matches!(e.op, syn::UnOp::Not(_)) => {
            is_recomputing_call(&e.expr).then_some(Guard::ForwardOnly)
        }
        _ => is_recomputing_call(cond).then_some(Guard::ReplayOnly),
    }
}

fn is_recomputing_call(expr: &Expr) -> bool {
    match expr {
        Expr::Paren(e) => is_recomputing_call(&e.expr),
        Expr::Call(call) => {
            call.args.is_empty()
                && matches!(&*call.func, Expr::Path(p)
                    if p.path.segments.last().is_some_and(|s| s.ident == "is_recomputing"))
        }
        _ => false,
    }
}

/// `x` (a single identifier path).
fn plain_ident(expr: &Expr) -> Option<&Ident> {
    match expr {
        Expr::Path(path) if path.qself.is_none() => path.path.get_ident(),
        Expr::Paren(e) => plain_ident(&e.expr),
        Expr::Group(e) => plain_ident(&e.expr),
        _ => None,
    }
}

fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Reference(e) => strip(&e.expr),
        Expr::Paren(e) => strip(&e.expr),
        Expr::Group(e) => strip(&e.expr),
        _ => expr,
    }
}

/// The place an expression reads, as written, without references and
/// views: `h.t` for `&h.t.view([-1])`.
fn place_text(expr: &Expr) -> Option<String> {
    fn base(expr: &Expr) -> Option<&Expr> {
        match expr {
            Expr::Reference(e) => base(&e.expr),
            Expr::Paren(e) => base(&e.expr),
            Expr::Group(e) => base(&e.expr),
            Expr::Unary(e) if matches!(e.op, syn::UnOp::Deref(_)) => base(&e.expr),
            Expr::MethodCall(e) if is_view(&e.method) => base(&e.receiver),
            Expr::Path(_) => plain_ident(expr).map(|_| expr),
            Expr::Field(e) => base(&e.base).map(|_| expr),
            Expr::Index(e) => base(&e.expr).map(|_| expr),
            _ => None,
        }
    }
    fn text(expr: &Expr) -> String {
        match expr {
            Expr::Reference(e) => text(&e.expr),
            Expr::Paren(e) => text(&e.expr),
            Expr::Group(e) => text(&e.expr),
            Expr::Unary(e) => text(&e.expr),
            Expr::MethodCall(e) => text(&e.receiver),
            Expr::Field(e) => format!("{}.{}", text(&e.base), compact(&e.member.to_token_stream())),
            Expr::Index(e) => format!("{}[{}]", text(&e.expr), compact(&e.index.to_token_stream())),
            other => compact(&other.to_token_stream()),
        }
    }
    base(expr).map(text)
}

fn literal_index(expr: &Expr) -> Option<u32> {
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse().ok(),
        Expr::Paren(e) => literal_index(&e.expr),
        _ => None,
    }
}

fn project(op: Operand, proj: Proj) -> Operand {
    match op {
        Operand::Place(local, mut projs) => {
            projs.push(proj);
            Operand::Place(local, projs)
        }
        other => Operand::Proj(Box::new(other), proj),
    }
}

fn member(member: &syn::Member) -> String {
    match member {
        syn::Member::Named(ident) => ident.to_string(),
        syn::Member::Unnamed(index) => index.index.to_string(),
    }
}

impl Lower {
    pub(crate) fn new(mode: Mode) -> Self {
        Lower {
            mode,
            out: vec![Vec::new()],
            scopes: vec![HashMap::new()],
            locals: Vec::new(),
            sites: Vec::new(),
            collect: Vec::new(),
            closure_sites: HashMap::new(),
            closures: Vec::new(),
            closure_count: 0,
            seq: 0,
            errors: Vec::new(),
            seen: HashMap::new(),
            loops: 0,
            unchecked: 0,
            forward_only: 0,
            macros: HashMap::new(),
            opaque_macro: false,
            depth: 0,
            too_deep: false,
            preparsed: Rc::default(),
        }
    }

    /// Reads the body's `remat!` invocations from `preparsed` (see
    /// `crate::preparsed`), so that the check's decisions reach the expansion.
    pub(crate) fn set_preparsed(&mut self, preparsed: Rc<Table>) {
        self.preparsed = preparsed;
    }

    /// The lowered body and the errors found while lowering, each with its
    /// position among the reads (to report everything in source order).
    pub(crate) fn finish(mut self) -> (Body, Vec<(usize, syn::Error)>) {
        let nodes = self.out.pop().unwrap_or_default();
        let body = Body {
            nodes,
            sites: self.sites,
        };
        (body, self.errors)
    }

    fn error(&mut self, error: syn::Error) {
        self.seq += 1;
        self.errors.push((self.seq, error));
    }

    fn emit(&mut self, node: Node) {
        if let Some(out) = self.out.last_mut() {
            out.push(node);
        }
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self)) -> Vec<Node> {
        self.out.push(Vec::new());
        f(self);
        self.out.pop().unwrap_or_default()
    }

    fn push_scope(&mut self) {
        self.scopes.push(HashMap::new());
    }

    fn pop_scope(&mut self) {
        if self.scopes.len() > 1 {
            self.scopes.pop();
        }
    }

    fn resolve(&self, name: &str) -> Option<LocalId> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn new_local(&mut self, kind: Kind) -> LocalId {
        self.locals.push(Local { kind });
        self.locals.len() - 1
    }

    fn declare(&mut self, name: &str, kind: Kind) -> LocalId {
        let id = self.new_local(kind);
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_owned(), id);
        }
        id
    }

    fn read(&mut self, operand: Operand, at: TokenStream, var: Option<String>, kind: ReadKind) {
        if self.unchecked > 0 {
            return;
        }
        self.seq += 1;
        let id = self.seq;
        self.emit(Node::Read(Read {
            id,
            operand,
            at,
            var,
            kind,
        }));
    }

    /// `expr` is used by bare code.
    fn read_expr(&mut self, expr: &Expr) {
        let op = self.value(expr);
        if matches!(op, Operand::Other | Operand::Nothing) {
            return;
        }
        let var = place_text(expr);
        self.read(op, expr.to_token_stream(), var, ReadKind::Bare);
    }

    // ------------------------------------------------------------ parameters

    pub(crate) fn param(&mut self, pat: &Pat, tensor: bool) {
        let kind = if tensor { Kind::Input } else { Kind::Plain };
        self.bind_pat(pat, Operand::Other, &kind);
    }

    // ------------------------------------------------------------ statements

    pub(crate) fn block_stmts(&mut self, stmts: &[syn::Stmt]) {
        for stmt in stmts {
            self.stmt(stmt);
        }
    }

    /// The statements of a `remat! { }` block, in the current scope.
    pub(crate) fn remat_stmts(&mut self, stmts: &[ast::Stmt], top: bool) {
        let count = stmts.len();
        for (i, stmt) in stmts.iter().enumerate() {
            match stmt {
                ast::Stmt::Region(stmt) => {
                    self.unchecked += usize::from(stmt.unchecked);
                    let cfg = stmt.attrs.iter().any(|a| a.path().is_ident("cfg"));
                    let nodes = self.nested(|this| {
                        let op = this.region(&stmt.region);
                        if let Some(pat) = &stmt.pat {
                            this.bind_region_output(pat, &stmt.region, op);
                        }
                    });
                    self.unchecked -= usize::from(stmt.unchecked);
                    self.splice(nodes, cfg);
                }
                ast::Stmt::Needs(stmt) => self.needs(stmt),
                ast::Stmt::MissingCall(stmt) => {
                    if self.resolve(&stmt.keyword.to_string()).is_some() {
                        // A local named `save`: ordinary Rust.
                        self.stmt(&syn::Stmt::Local(stmt.local.clone()));
                    } else {
                        // The expansion reports it, in place of the
                        // statement, and binds the pattern to nothing
                        // the check tracks.
                        stmt.refused.set(true);
                        self.bind_pat(&stmt.local.pat, Operand::Other, &Kind::Plain);
                    }
                }
                ast::Stmt::Scope(stmt) => {
                    if let Name::Dynamic(expr) = &stmt.name {
                        self.read_expr(expr);
                    }
                    // Reporting only: not a Rust scope, bindings stay visible.
                    self.unchecked += usize::from(stmt.unchecked);
                    self.remat_stmts(&stmt.stmts, false);
                    self.unchecked -= usize::from(stmt.unchecked);
                }
                ast::Stmt::Bare(inner) => {
                    // A standalone block's trailing expression leaves it to
                    // code the check does not see: a read.
                    let tail = top && self.mode == Mode::Block && i + 1 == count;
                    match &**inner {
                        syn::Stmt::Expr(expr, None) if tail => {
                            self.with_attrs(inner, |this| this.read_expr(expr))
                        }
                        _ => self.stmt(inner),
                    }
                }
            }
        }
    }

    /// Nodes of a statement, optional under `#[cfg]`.
    fn splice(&mut self, nodes: Vec<Node>, cfg: bool) {
        if cfg {
            self.emit(Node::Branch(vec![nodes, Vec::new()]));
        } else if let Some(out) = self.out.last_mut() {
            out.extend(nodes);
        }
    }

    /// Runs `f` with the statement's `#[remat(unchecked)]` in force, and
    /// makes it optional under `#[cfg]`.
    fn with_attrs(&mut self, stmt: &syn::Stmt, f: impl FnOnce(&mut Self)) {
        let attrs = unchecked_attr::stmt_attrs(stmt);
        let unchecked = match unchecked_attr::unchecked(attrs) {
            Ok(unchecked) => unchecked,
            Err(error) => {
                // A misspelt `#[remat(...)]` was meant to silence the check:
                // its own error suffices, without the reads it would hide.
                self.error(error);
                true
            }
        };
        let cfg = attrs.iter().any(|a| a.path().is_ident("cfg"));
        self.unchecked += usize::from(unchecked);
        let nodes = self.nested(f);
        self.unchecked -= usize::from(unchecked);
        self.splice(nodes, cfg);
    }

    fn stmt(&mut self, stmt: &syn::Stmt) {
        self.with_attrs(stmt, |this| match stmt {
            syn::Stmt::Local(local) => this.local(local),
            syn::Stmt::Item(syn::Item::Macro(item)) => {
                if let Some(ident) = &item.ident {
                    this.macros
                        .insert(ident.to_string(), item.mac.tokens.clone());
                }
            }
            syn::Stmt::Item(_) => {}
            syn::Stmt::Expr(expr, _) => {
                this.value(expr);
            }
            syn::Stmt::Macro(mac) => {
                this.macro_value(&mac.mac, true);
            }
        });
    }

    fn local(&mut self, local: &syn::Local) {
        let Some(init) = &local.init else {
            self.bind_pat(&local.pat, Operand::Nothing, &Kind::Plain);
            return;
        };
        if let Some((_, diverge)) = &init.diverge {
            let arm = self.nested(|this| {
                this.value(diverge);
                this.emit(Node::Return);
            });
            self.emit(Node::Branch(vec![Vec::new(), arm]));
        }
        if let Some(parsed) = self.remat_expr(&init.expr) {
            if let Invocation::Expr(region) = &parsed.invocation {
                let op = self.region(region);
                self.bind_region_output(&local.pat, region, op);
                return;
            }
        }
        let closure = matches!(strip(&init.expr), Expr::Closure(_));
        let before = self.sites.len();
        let op = self.value(&init.expr);
        self.bind_pat(&local.pat, op, &Kind::Plain);
        if closure {
            if let Pat::Ident(p) = &local.pat {
                if let Some(id) = self.resolve(&p.ident.to_string()) {
                    self.closure_sites
                        .insert(id, (before..self.sites.len()).collect());
                }
            }
        }
    }

    fn bind_region_output(&mut self, pat: &Pat, region: &Region, op: Operand) {
        let kind = match region.policy.kind {
            PolicyKind::Recompute => Kind::Recomputed(region.name.display()),
            _ => Kind::Plain,
        };
        if let Operand::Fresh(site) = op {
            self.record_names(site, pat, Vec::new());
        }
        self.bind_pat(pat, op, &kind);
    }

    /// Names the parts of a fresh output for messages.
    fn record_names(&mut self, site: SiteId, pat: &Pat, path: Vec<Proj>) {
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

    /// Binds the names of `pat` to the parts of `op`.
    fn bind_pat(&mut self, pat: &Pat, op: Operand, kind: &Kind) {
        match pat {
            Pat::Ident(p) => {
                if let Some((_, sub)) = &p.subpat {
                    self.bind_pat(sub, op.clone(), kind);
                }
                let id = self.declare(&p.ident.to_string(), kind.clone());
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
                let transparent = t.path.segments.last().is_some_and(|s| {
                    matches!(s.ident.to_string().as_str(), "Some" | "Ok" | "Err" | "Box")
                }) && t.elems.len() == 1;
                if transparent {
                    self.bind_pat(&t.elems[0], op, kind);
                } else {
                    self.bind_elems(t.elems.iter(), op, kind, |i| Proj::Field(i.to_string()));
                }
            }
            Pat::Struct(s) => {
                for field in &s.fields {
                    let part = project(op.clone(), Proj::Field(member(&field.member)));
                    self.bind_pat(&field.pat, part, kind);
                }
            }
            Pat::Or(o) => {
                for case in &o.cases {
                    self.bind_pat(case, project(op.clone(), Proj::Index(None)), kind);
                }
            }
            _ => {}
        }
    }

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
            self.bind_pat(elem, project(op.clone(), p), kind);
        }
    }

    // -------------------------------------------------------------- regions

    /// Lowers one region: its name, policy and arguments (bare code, where
    /// a save output passed directly is fine), its callee where it may run
    /// on replay; returns its output.
    fn region(&mut self, region: &Region) -> Operand {
        match &region.name {
            Name::Static { value, span } => self.note_name(value, *span),
            Name::Dynamic(expr) => self.read_expr(expr),
        }
        if let Some(expr) = &region.policy_expr {
            self.read_expr(expr);
        }
        for arg in region.call.args() {
            self.pass_arg(arg);
        }
        let name = region.name.display();
        if region.policy.kind != PolicyKind::Save {
            let callee = match &region.call {
                Call::Fn(call) => &*call.func,
                Call::Method(call) => &*call.receiver,
            };
            let op = self.value(callee);
            if !matches!(op, Operand::Other | Operand::Nothing) {
                let kind = ReadKind::Callee {
                    keyword: region.policy.keyword().to_owned(),
                    region: name.clone(),
                };
                self.read(op, callee.to_token_stream(), place_text(callee), kind);
            }
        }
        if region.policy.kind == PolicyKind::Recompute {
            return Operand::Other;
        }
        let dynamic = region
            .policy_expr
            .as_ref()
            .map(|e| compact(&e.to_token_stream()));
        self.sites.push(Site {
            region: name,
            dynamic,
            auto: region.policy.kind == PolicyKind::Auto,
            names: Vec::new(),
        });
        let site = self.sites.len() - 1;
        for sites in &mut self.collect {
            sites.push(site);
        }
        self.emit(Node::Def(site));
        Operand::Fresh(site)
    }

    /// A region argument: passing a save output (or a view, a slice, an
    /// array, `vec!` or `Some` of them) is not a read.
    fn pass_arg(&mut self, arg: &Expr) {
        match arg {
            Expr::Reference(e) => self.pass_arg(&e.expr),
            Expr::Paren(e) => self.pass_arg(&e.expr),
            Expr::Group(e) => self.pass_arg(&e.expr),
            Expr::Array(a) => a.elems.iter().for_each(|e| self.pass_arg(e)),
            Expr::Tuple(a) => a.elems.iter().for_each(|e| self.pass_arg(e)),
            Expr::Call(call)
                if call.args.len() == 1
                    && matches!(&*call.func, Expr::Path(p) if p.path.is_ident("Some")) =>
            {
                self.pass_arg(&call.args[0]);
            }
            Expr::Macro(m) if m.mac.path.is_ident("vec") => {
                match m
                    .mac
                    .parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated)
                {
                    Ok(elems) => elems.iter().for_each(|e| self.pass_arg(e)),
                    Err(_) => self.read_expr(arg),
                }
            }
            _ => {
                self.value(arg);
            }
        }
    }

    /// Duplicate static names (outside loops, on one path).
    fn note_name(&mut self, value: &str, span: Span) {
        if self.loops > 0 {
            return;
        }
        if self.seen.contains_key(value) {
            let place = match self.mode {
                Mode::Checkpoint => "checkpoint",
                Mode::Block => "`remat!` block",
            };
            self.error(report::duplicate_name(span, value, place));
        } else {
            self.seen.insert(value.to_owned(), span);
        }
    }

    fn needs(&mut self, stmt: &ast::NeedsStmt) {
        for (expr, dropped) in stmt.exprs.iter().zip(&stmt.dropped) {
            let op = self.value(expr);
            if let Some(ident) = plain_ident(strip(expr)) {
                let name = ident.to_string();
                let at = expr.to_token_stream();
                match self.resolve(&name).map(|id| self.locals[id].kind.clone()) {
                    Some(Kind::Input) => {
                        let what = format!(
                            "`{name}` is an input of the checkpoint, which replay gets back as it was"
                        );
                        self.error(report::needs_no_effect(&at, &name, &what));
                        continue;
                    }
                    Some(Kind::Recomputed(region)) => {
                        let what = format!(
                            "`{name}` holds the output of `recompute` region `{region}`, which replay recomputes"
                        );
                        self.error(report::needs_no_effect(&at, &name, &what));
                        continue;
                    }
                    Some(Kind::Plain) => {}
                    None => {
                        if self.mode == Mode::Checkpoint && !self.opaque_macro && name != "self" {
                            let similar = self.similar(&name);
                            self.error(report::needs_unknown(&at, &name, similar.as_deref()));
                            // rustc would report the name again.
                            dropped.set(true);
                            continue;
                        }
                    }
                }
            }
            if self.forward_only == 0 {
                self.emit(Node::Needs(op));
            }
        }
    }

    /// A `remat!` expression, parsed (`Some` for either form; the caller
    /// wants the expression form).
    fn remat_expr(&self, expr: &Expr) -> Option<Rc<Parsed>> {
        let Expr::Macro(mac) = expr else { return None };
        ast::is_remat(&mac.mac).then(|| self.preparsed.get(&mac.mac))
    }

    /// A local name close to `name` (one edit away), for suggestions.
    fn similar(&self, name: &str) -> Option<String> {
        let mut names: Vec<&String> = self.scopes.iter().flat_map(|s| s.keys()).collect();
        names.sort();
        names
            .into_iter()
            .find(|candidate| name.len() > 2 && edit_distance(candidate, name) <= 1)
            .cloned()
    }

    // ---------------------------------------------------------- expressions

    /// Lowers `expr`, emitting the reads it performs, and returns what its
    /// value may carry.
    pub(crate) fn value(&mut self, expr: &Expr) -> Operand {
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
            Expr::Path(_) => match plain_ident(expr).and_then(|i| self.resolve(&i.to_string())) {
                Some(id) => Operand::Place(id, Vec::new()),
                None => Operand::Other,
            },
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
                project(base, Proj::Field(member(&e.member)))
            }
            Expr::Index(e) => {
                let index = literal_index(&e.index);
                if index.is_none() {
                    self.read_expr(&e.index);
                }
                let base = self.value(&e.expr);
                project(base, Proj::Index(index))
            }
            Expr::MethodCall(call) => {
                let method = &call.method;
                if is_view(method) || is_metadata(method) {
                    for arg in &call.args {
                        self.read_expr(arg);
                    }
                    let receiver = self.value(&call.receiver);
                    return if is_metadata(method) {
                        Operand::Other
                    } else {
                        receiver
                    };
                }
                if (method == "iter" || method == "into_iter") && call.args.is_empty() {
                    return self.value(&call.receiver);
                }
                self.read_expr(&call.receiver);
                self.call_args(call.args.iter())
            }
            Expr::Call(call) => {
                if call.args.len() == 1 {
                    if let Expr::Path(p) = &*call.func {
                        let last = p.path.segments.last().map(|s| s.ident.to_string());
                        if matches!(last.as_deref(), Some("Some" | "Ok" | "Err")) {
                            return self.value(&call.args[0]);
                        }
                    }
                }
                if let Some(id) = plain_ident(&call.func).and_then(|i| self.resolve(&i.to_string()))
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
                if let Some(rest) = &s.rest {
                    self.read_expr(rest);
                }
                Operand::Parts(
                    s.fields
                        .iter()
                        .map(|f| (Proj::Field(member(&f.member)), self.value(&f.expr)))
                        .collect(),
                )
            }
            Expr::Macro(m) => self.macro_value(&m.mac, false),
            Expr::Block(b) => self.block_value(&b.block),
            Expr::Unsafe(b) => self.block_value(&b.block),
            Expr::If(e) => self.if_value(e),
            Expr::Match(e) => self.match_value(e),
            Expr::Closure(c) => self.closure_value(c),
            Expr::ForLoop(e) => {
                let iter = self.value(&e.expr);
                let label = e.label.as_ref().map(|l| l.name.ident.to_string());
                self.loops += 1;
                self.push_scope();
                let body = self.nested(|this| {
                    this.bind_pat(&e.pat, project(iter, Proj::Index(None)), &Kind::Plain);
                    this.block_stmts(&e.body.stmts);
                });
                self.pop_scope();
                self.loops -= 1;
                self.emit(Node::Loop { label, body });
                Operand::Other
            }
            Expr::While(e) => {
                let label = e.label.as_ref().map(|l| l.name.ident.to_string());
                self.loops += 1;
                self.push_scope();
                let body = self.nested(|this| {
                    this.cond(&e.cond);
                    let then = this.nested(|this| {
                        this.push_scope();
                        this.block_stmts(&e.body.stmts);
                        this.pop_scope();
                    });
                    this.emit(Node::Branch(vec![then, vec![Node::Break(None)]]));
                });
                self.pop_scope();
                self.loops -= 1;
                self.emit(Node::Loop { label, body });
                Operand::Other
            }
            Expr::Loop(e) => {
                let label = e.label.as_ref().map(|l| l.name.ident.to_string());
                self.loops += 1;
                let body = self.nested(|this| {
                    this.block_value(&e.body);
                });
                self.loops -= 1;
                self.emit(Node::Loop { label, body });
                Operand::Other
            }
            Expr::Assign(e) => {
                self.assign(&e.left, &e.right);
                Operand::Other
            }
            Expr::Binary(e) => {
                self.read_expr(&e.left);
                self.read_expr(&e.right);
                if is_compound(&e.op) {
                    if let Some((local, projs, weak)) = self.place(&e.left) {
                        self.emit(Node::Assign {
                            local,
                            projs,
                            value: Operand::Other,
                            weak,
                        });
                    }
                }
                Operand::Other
            }
            Expr::Let(e) => {
                let op = self.value(&e.expr);
                self.bind_pat(&e.pat, op, &Kind::Plain);
                Operand::Other
            }
            Expr::Return(e) => {
                self.returned(e.expr.as_deref());
                Operand::Other
            }
            Expr::Break(e) => {
                if let Some(value) = &e.expr {
                    self.read_expr(value);
                }
                let label = e.label.as_ref().map(|l| l.ident.to_string());
                self.emit(Node::Break(label));
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
                self.scan_tokens(other.to_token_stream(), "this expression");
                Operand::Other
            }
        }
    }

    /// The arguments of a call that is not a region: read, except closures,
    /// whose results may come back in the call's result.
    fn call_args<'a>(&mut self, args: impl Iterator<Item = &'a Expr>) -> Operand {
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

    fn cond(&mut self, cond: &Expr) {
        match cond {
            Expr::Let(_) => {
                self.value(cond);
            }
            Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
                self.cond(&b.left);
                self.cond(&b.right);
            }
            Expr::Paren(e) => self.cond(&e.expr),
            _ => self.read_expr(cond),
        }
    }

    fn temp(&mut self) -> LocalId {
        self.new_local(Kind::Plain)
    }

    fn assign_temp(&mut self, temp: LocalId, op: Operand, weak: bool) {
        self.emit(Node::Assign {
            local: temp,
            projs: Vec::new(),
            value: op,
            weak,
        });
    }

    fn block_value(&mut self, block: &syn::Block) -> Operand {
        self.push_scope();
        let count = block.stmts.len();
        let mut result = Operand::Other;
        for (i, stmt) in block.stmts.iter().enumerate() {
            let tail = i + 1 == count;
            match stmt {
                syn::Stmt::Expr(expr, None) if tail => {
                    let temp = self.temp();
                    self.with_attrs(stmt, |this| {
                        let op = this.value(expr);
                        this.assign_temp(temp, op, false);
                    });
                    result = Operand::Place(temp, Vec::new());
                }
                syn::Stmt::Macro(mac) if tail && mac.semi_token.is_none() => {
                    let temp = self.temp();
                    self.with_attrs(stmt, |this| {
                        let op = this.macro_value(&mac.mac, false);
                        this.assign_temp(temp, op, false);
                    });
                    result = Operand::Place(temp, Vec::new());
                }
                _ => self.stmt(stmt),
            }
        }
        self.pop_scope();
        result
    }

    fn if_value(&mut self, e: &syn::ExprIf) -> Operand {
        let guard = recomputing_guard(&e.cond);
        let temp = self.temp();
        self.push_scope();
        self.cond(&e.cond);
        let before = self.seen.clone();
        let forward = usize::from(guard == Some(Guard::ForwardOnly));
        let then = self.nested(|this| {
            this.unchecked += forward;
            this.forward_only += forward;
            let op = this.block_value(&e.then_branch);
            this.assign_temp(temp, op, false);
            this.unchecked -= forward;
            this.forward_only -= forward;
        });
        self.pop_scope();
        let after_then = std::mem::replace(&mut self.seen, before);
        let forward = usize::from(guard == Some(Guard::ReplayOnly));
        let other = self.nested(|this| {
            this.unchecked += forward;
            this.forward_only += forward;
            let op = match &e.else_branch {
                Some((_, else_branch)) => this.value(else_branch),
                None => Operand::Other,
            };
            this.assign_temp(temp, op, false);
            this.unchecked -= forward;
            this.forward_only -= forward;
        });
        self.seen.extend(after_then);
        self.emit(Node::Branch(vec![then, other]));
        Operand::Place(temp, Vec::new())
    }

    fn match_value(&mut self, e: &syn::ExprMatch) -> Operand {
        let scrutinee = self.value(&e.expr);
        let temp = self.temp();
        let before = self.seen.clone();
        let mut after = before.clone();
        let mut arms = Vec::new();
        for arm in &e.arms {
            self.seen = before.clone();
            let nodes = self.nested(|this| {
                this.push_scope();
                this.bind_pat(&arm.pat, scrutinee.clone(), &Kind::Plain);
                if let Some((_, guard)) = &arm.guard {
                    this.read_expr(guard);
                }
                let op = this.value(&arm.body);
                this.assign_temp(temp, op, false);
                this.pop_scope();
            });
            arms.push(nodes);
            after.extend(std::mem::take(&mut self.seen));
        }
        self.seen = after;
        self.emit(Node::Branch(arms));
        Operand::Place(temp, Vec::new())
    }

    /// A closure may run any number of times, later: its body is lowered as
    /// a loop where it is written (Rust's borrows keep what it captures
    /// from changing meanwhile), its result kept in a local.
    fn closure_value(&mut self, c: &syn::ExprClosure) -> Operand {
        let result = self.temp();
        self.closure_count += 1;
        let label = format!("'__remat_closure{}", self.closure_count);
        self.closures.push(Closure {
            label: label.clone(),
            result,
        });
        self.collect.push(Vec::new());
        self.loops += 1;
        self.push_scope();
        let body = self.nested(|this| {
            for input in &c.inputs {
                this.bind_pat(input, Operand::Other, &Kind::Plain);
            }
            let op = this.value(&c.body);
            this.assign_temp(result, op, true);
        });
        self.pop_scope();
        self.loops -= 1;
        self.collect.pop();
        self.closures.pop();
        self.emit(Node::Loop {
            label: Some(label),
            body,
        });
        Operand::Place(result, Vec::new())
    }

    fn returned(&mut self, value: Option<&Expr>) {
        if let Some(closure) = self.closures.last() {
            let (label, result) = (closure.label.clone(), closure.result);
            if let Some(value) = value {
                let op = self.value(value);
                self.assign_temp(result, op, true);
            }
            self.emit(Node::Break(Some(label)));
            return;
        }
        if let Some(value) = value {
            match self.mode {
                // On replay the checkpoint's return value is discarded.
                Mode::Checkpoint => {
                    self.value(value);
                }
                Mode::Block => self.read_expr(value),
            }
        }
        self.emit(Node::Return);
    }

    /// `left = right`.
    fn assign(&mut self, left: &Expr, right: &Expr) {
        if let Expr::Tuple(t) = strip(left) {
            let op = self.value(right);
            for (i, elem) in t.elems.iter().enumerate() {
                let part = project(op.clone(), Proj::Field(i.to_string()));
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
            Some((local, projs, weak)) => {
                if projs.is_empty() {
                    self.locals[local].kind = Kind::Plain;
                }
                self.emit(Node::Assign {
                    local,
                    projs,
                    value: op,
                    weak,
                });
            }
            // Stored where the check cannot follow: a read.
            None => {
                if !matches!(op, Operand::Other | Operand::Nothing) {
                    let var = place_text(right);
                    self.read(op, right.to_token_stream(), var, ReadKind::Bare);
                }
            }
        }
    }

    /// The place an assignment writes: a local, its fields and indexes.
    fn place(&mut self, expr: &Expr) -> Option<(LocalId, Vec<Proj>, bool)> {
        match expr {
            Expr::Paren(e) => self.place(&e.expr),
            Expr::Group(e) => self.place(&e.expr),
            Expr::Path(_) => {
                let ident = plain_ident(expr)?.to_string();
                match self.resolve(&ident) {
                    Some(id) => Some((id, Vec::new(), false)),
                    // In a standalone block, a local from outside.
                    None if self.mode == Mode::Block && ident != "self" => {
                        let id = self.new_local(Kind::Plain);
                        if let Some(scope) = self.scopes.first_mut() {
                            scope.insert(ident, id);
                        }
                        Some((id, Vec::new(), false))
                    }
                    None => None,
                }
            }
            Expr::Field(e) => {
                let (id, mut projs, weak) = self.place(&e.base)?;
                projs.push(Proj::Field(member(&e.member)));
                Some((id, projs, weak))
            }
            Expr::Index(e) => {
                let index = literal_index(&e.index);
                if index.is_none() {
                    self.read_expr(&e.index);
                }
                let (id, mut projs, _) = self.place(&e.expr)?;
                projs.push(Proj::Index(index));
                Some((id, projs, true))
            }
            _ => None,
        }
    }

    // --------------------------------------------------------------- macros

    /// A macro invocation: `remat!` is lowered as regions; `vec!` as an
    /// array; a macro defined in the body reads every tracked local its
    /// definition names; any other is read as comma-separated expressions
    /// (format strings' captures and named arguments included) when it
    /// parses that way, else its tokens are scanned for local names.
    fn macro_value(&mut self, mac: &Macro, statement: bool) -> Operand {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        if ast::is_remat(mac) {
            let parsed = self.preparsed.get(mac);
            return match &parsed.invocation {
                Invocation::Expr(region) => self.region(region),
                Invocation::Stmts(stmts) => {
                    self.remat_stmts(stmts, false);
                    Operand::Other
                }
            };
        }
        let at = mac.to_token_stream();
        if let Some(definition) = self.macros.get(&name).cloned() {
            if contains_remat(&definition) {
                if self.unchecked == 0 {
                    self.error(report::hidden_remat(&at, &name));
                }
            } else {
                self.scan_tokens(definition, &name);
            }
            self.scan_tokens(mac.tokens.clone(), &name);
            if statement {
                self.opaque_macro = true;
            }
            return Operand::Other;
        }
        // A `remat!` inside another macro's input: only the standard macros
        // are known to evaluate their arguments as written.
        if !is_std_macro(&name) && contains_remat(&mac.tokens) {
            if self.unchecked == 0 {
                self.error(report::hidden_remat(&at, &name));
            }
            if statement {
                self.opaque_macro = true;
            }
            return Operand::Other;
        }
        // A macro statement may bind names (hygiene permitting) the check
        // does not see.
        if statement && !is_std_macro(&name) {
            self.opaque_macro = true;
        }
        let parsed = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated);
        match parsed {
            Ok(args) if name == "vec" => Operand::Parts(
                args.iter()
                    .map(|e| (Proj::Index(None), self.value(e)))
                    .collect(),
            ),
            Ok(args) => {
                for arg in &args {
                    match arg {
                        Expr::Lit(syn::ExprLit {
                            lit: Lit::Str(lit), ..
                        }) => self.format_captures(lit),
                        // `format!("{t}", t = a)`: a named argument.
                        Expr::Assign(assign) => self.read_expr(&assign.right),
                        _ => self.read_expr(arg),
                    }
                }
                Operand::Other
            }
            Err(_) => {
                if contains_remat(&mac.tokens) {
                    if self.unchecked == 0 {
                        self.error(report::hidden_remat(&at, &name));
                    }
                } else {
                    self.scan_tokens(mac.tokens.clone(), &name);
                }
                if statement {
                    self.opaque_macro = true;
                }
                Operand::Other
            }
        }
    }

    /// `println!("{attn}")` reads `attn`.
    fn format_captures(&mut self, lit: &LitStr) {
        let value = lit.value();
        let mut chars = value.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '{' {
                continue;
            }
            if chars.peek() == Some(&'{') {
                chars.next();
                continue;
            }
            let mut name = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_alphanumeric() || c == '_' {
                    name.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            self.read_name(&name, lit.to_token_stream());
        }
    }

    /// Tokens the check cannot parse: every free identifier naming a local
    /// is a read. Iterative, whatever the nesting.
    fn scan_tokens(&mut self, tokens: TokenStream, _what: &str) {
        let mut stack: Vec<Vec<TokenTree>> = vec![tokens.into_iter().collect()];
        while let Some(tokens) = stack.pop() {
            for (i, token) in tokens.iter().enumerate() {
                match token {
                    TokenTree::Group(group) => stack.push(group.stream().into_iter().collect()),
                    TokenTree::Ident(ident) => {
                        let punct = |t: Option<&TokenTree>, chars: &[char]| matches!(t, Some(TokenTree::Punct(p)) if chars.contains(&p.as_char()));
                        let member = i > 0 && punct(tokens.get(i - 1), &['.']);
                        let path = punct(tokens.get(i + 1), &[':', '!']);
                        if !member && !path {
                            self.read_name(&ident.to_string(), ident.to_token_stream());
                        }
                    }
                    TokenTree::Literal(lit) => {
                        if let Ok(lit) = syn::parse2::<LitStr>(lit.to_token_stream()) {
                            self.format_captures(&lit);
                        }
                    }
                    TokenTree::Punct(_) => {}
                }
            }
        }
    }

    fn read_name(&mut self, name: &str, at: TokenStream) {
        if let Some(id) = self.resolve(name) {
            self.read(
                Operand::Place(id, Vec::new()),
                at,
                Some(name.to_owned()),
                ReadKind::Bare,
            );
        }
    }
}

/// Macros of `std` whose arguments are expressions evaluated in place.
fn is_std_macro(name: &str) -> bool {
    matches!(
        name,
        "println"
            | "print"
            | "eprintln"
            | "eprint"
            | "format"
            | "format_args"
            | "write"
            | "writeln"
            | "panic"
            | "assert"
            | "assert_eq"
            | "assert_ne"
            | "debug_assert"
            | "debug_assert_eq"
            | "debug_assert_ne"
            | "dbg"
            | "vec"
            | "todo"
            | "unimplemented"
            | "unreachable"
    )
}

fn is_compound(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// Whether tokens invoke `remat!` (at any depth).
fn contains_remat(tokens: &TokenStream) -> bool {
    let mut stack: Vec<Vec<TokenTree>> = vec![tokens.clone().into_iter().collect()];
    while let Some(tokens) = stack.pop() {
        for (i, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Group(g) => stack.push(g.stream().into_iter().collect()),
                TokenTree::Ident(ident) if ident == "remat" => {
                    if matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!')
                    {
                        return true;
                    }
                }
                _ => {}
            }
        }
    }
    false
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
