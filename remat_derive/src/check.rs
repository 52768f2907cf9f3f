//! The compile-time check: bare code must not read a `save` region's output
//! unless it said so with `needs`.
//!
//! On replay a `save` region is skipped and its output is a placeholder
//! unless something asked the runtime to keep it. Region arguments ask
//! automatically; bare code can only ask with `needs x;`. This module tracks,
//! through `let`s, views, Rust scopes and shadowing, which local names hold
//! (a view of) a save output, and reports every read that is not allowed
//! (dsl.md, "The compile-time check"). It is syntactic and conservative:
//! what it cannot see (helpers, fields, closures that escape) is left to the
//! runtime's placeholders.

use std::collections::{HashMap, HashSet};

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Expr, ExprIf, ExprMatch, Ident, Lit, LitStr, Macro, Pat, Token};

use crate::ast::{self, Call, Invocation, Name, PolicyKind, Region};
use crate::attr;
use crate::errors::push_error;
use crate::parse;

/// Where the checked code lives.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The whole body of a `#[checkpoint]` function.
    Checkpoint,
    /// One standalone `remat! { }` block.
    Block,
}

/// What a local name holds, as far as the check can tell.
#[derive(Clone)]
enum Binding {
    /// A save output, or a view of one: the index of the produced value.
    Saved(usize),
    /// A tensor parameter of the checkpoint.
    Input,
    /// The output of a `recompute` region (its name, for messages).
    Recomputed(String),
    /// Anything else.
    Plain,
}

/// What a new `let` binds its names to.
enum NewBinding {
    /// A fresh save output of the named region: one value per bound name.
    Save(String),
    /// A view or alias of an existing value.
    Alias(usize),
    Recomputed(String),
    Input,
    Plain,
}

/// A value produced by a `save` region: marks belong to it, not to a name.
struct Root {
    var: String,
    region: String,
}

#[derive(Default)]
struct Scope {
    names: HashMap<String, Binding>,
    /// Values marked by `needs` in this scope.
    marked: HashSet<usize>,
}

/// An expression that denotes (a view of) a save output.
enum Saved {
    /// Through a local name.
    Named { root: usize, var: String },
    /// A `remat!(save ...)` expression used in place.
    Anonymous(Box<Region>),
}

/// Where a save output is read.
enum Site<'a> {
    Bare,
    /// The receiver or function of a `recompute` region, which is captured
    /// by its body rather than passed as an input.
    Callee(&'a Region),
}

/// `if !is_recomputing()` runs its block on the forward only;
/// `if is_recomputing()` runs its `else` on the forward only.
#[derive(PartialEq, Eq)]
enum Guard {
    ForwardOnly,
    ReplayOnly,
}

/// The checker. Feed it a body or statements, then take its errors.
pub(crate) struct Checker {
    mode: Mode,
    scopes: Vec<Scope>,
    roots: Vec<Root>,
    /// Static region names seen on the current control-flow path.
    seen: HashMap<String, Span>,
    /// Depth of loops and closures: names there may repeat legitimately
    /// (with a dynamic name) and are not compared.
    loops: usize,
    closures: usize,
    /// Depth of `#[remat(unchecked)]` statements and forward-only branches.
    unchecked: usize,
    errors: Option<syn::Error>,
}

impl Checker {
    pub(crate) fn new(mode: Mode) -> Self {
        Checker {
            mode,
            scopes: vec![Scope::default()],
            roots: Vec::new(),
            seen: HashMap::new(),
            loops: 0,
            closures: 0,
            unchecked: 0,
            errors: None,
        }
    }

    /// Declares a parameter of the checkpoint function: a tensor parameter
    /// is an input, which replay reproduces.
    pub(crate) fn param(&mut self, pat: &Pat, tensor: bool) {
        let new = if tensor {
            NewBinding::Input
        } else {
            NewBinding::Plain
        };
        self.bind(pat, new);
    }

    /// Checks the body of a `#[checkpoint]` function (its tail is returned).
    pub(crate) fn body(&mut self, block: &syn::Block) {
        self.block(block, true);
    }

    /// Checks the statements of a `remat! { }` block (in the current scope:
    /// the block expands to plain statements).
    pub(crate) fn remat_stmts(&mut self, stmts: &[ast::Stmt]) {
        for stmt in stmts {
            match stmt {
                ast::Stmt::Region(stmt) => {
                    self.unchecked += usize::from(stmt.unchecked);
                    self.region(&stmt.region);
                    self.unchecked -= usize::from(stmt.unchecked);
                    if let Some(pat) = &stmt.pat {
                        self.bind(pat, region_binding(&stmt.region));
                    }
                }
                ast::Stmt::Needs(stmt) => self.needs(stmt),
                ast::Stmt::Scope(stmt) => {
                    if let Name::Dynamic(expr) = &stmt.name {
                        self.visit_expr(expr);
                    }
                    // Reporting only: not a Rust scope, bindings stay visible.
                    self.unchecked += usize::from(stmt.unchecked);
                    self.remat_stmts(&stmt.stmts);
                    self.unchecked -= usize::from(stmt.unchecked);
                }
                ast::Stmt::Bare(stmt) => self.stmt(stmt),
            }
        }
    }

    /// The errors found, combined.
    pub(crate) fn finish(self) -> Option<syn::Error> {
        self.errors
    }

    fn error(&mut self, error: syn::Error) {
        push_error(&mut self.errors, error);
    }

    fn scope(&mut self) -> &mut Scope {
        if self.scopes.is_empty() {
            self.scopes.push(Scope::default());
        }
        let last = self.scopes.len() - 1;
        &mut self.scopes[last]
    }

    fn push(&mut self) {
        self.scopes.push(Scope::default());
    }

    fn pop(&mut self) {
        // The base scope (parameters) is never popped.
        if self.scopes.len() > 1 {
            self.scopes.pop();
        }
    }

    fn lookup(&self, name: &str) -> Option<&Binding> {
        self.scopes.iter().rev().find_map(|s| s.names.get(name))
    }

    fn is_marked(&self, root: usize) -> bool {
        self.scopes.iter().any(|s| s.marked.contains(&root))
    }

    fn bind(&mut self, pat: &Pat, new: NewBinding) {
        for ident in pat_names(pat) {
            let var = ident.to_string();
            let binding = match &new {
                NewBinding::Save(region) => {
                    self.roots.push(Root {
                        var: var.clone(),
                        region: region.clone(),
                    });
                    Binding::Saved(self.roots.len() - 1)
                }
                NewBinding::Alias(root) => Binding::Saved(*root),
                NewBinding::Recomputed(region) => Binding::Recomputed(region.clone()),
                NewBinding::Input => Binding::Input,
                NewBinding::Plain => Binding::Plain,
            };
            self.scope().names.insert(var, binding);
        }
    }

    fn block(&mut self, block: &syn::Block, returned: bool) {
        self.push();
        let count = block.stmts.len();
        for (i, stmt) in block.stmts.iter().enumerate() {
            let tail = returned && i + 1 == count;
            match stmt {
                syn::Stmt::Expr(expr, None) if tail => self.with_attrs(stmt, |c| c.returned(expr)),
                syn::Stmt::Macro(mac) if tail && mac.semi_token.is_none() => {
                    let expr = Expr::Macro(syn::ExprMacro {
                        attrs: Vec::new(),
                        mac: mac.mac.clone(),
                    });
                    self.with_attrs(stmt, |c| c.returned(&expr));
                }
                _ => self.stmt(stmt),
            }
        }
        self.pop();
    }

    /// Runs `f` with the statement's `#[remat(unchecked)]` in force.
    fn with_attrs(&mut self, stmt: &syn::Stmt, f: impl FnOnce(&mut Self)) {
        let unchecked = match attr::unchecked(attr::stmt_attrs(stmt)) {
            Ok(unchecked) => unchecked,
            Err(error) => {
                // A misspelt `#[remat(...)]` was meant to silence the check:
                // its own error suffices, without the reads it would hide.
                self.error(error);
                true
            }
        };
        self.unchecked += usize::from(unchecked);
        f(self);
        self.unchecked -= usize::from(unchecked);
    }

    fn stmt(&mut self, stmt: &syn::Stmt) {
        self.with_attrs(stmt, |c| match stmt {
            syn::Stmt::Local(local) => c.local(local),
            syn::Stmt::Item(_) => {}
            syn::Stmt::Expr(expr, _) => c.visit_expr(expr),
            syn::Stmt::Macro(mac) => c.any_macro(&mac.mac),
        });
    }

    fn local(&mut self, local: &syn::Local) {
        let new = match &local.init {
            None => NewBinding::Plain,
            Some(init) => {
                let new = self.init(&init.expr);
                if let Some((_, diverge)) = &init.diverge {
                    self.visit_expr(diverge);
                }
                new
            }
        };
        self.bind(&local.pat, new);
    }

    /// Checks the initializer of a `let` and says what it binds.
    fn init(&mut self, expr: &Expr) -> NewBinding {
        if let Some(region) = remat_expr(expr) {
            self.region(&region);
            return region_binding(&region);
        }
        match self.saved(expr) {
            Some(saved) => {
                // A view or alias of a save output is one too (rule 2).
                self.visit_parts(expr);
                match saved {
                    Saved::Named { root, .. } => NewBinding::Alias(root),
                    Saved::Anonymous(region) => NewBinding::Save(region.name.display()),
                }
            }
            None => {
                self.visit_expr(expr);
                NewBinding::Plain
            }
        }
    }

    /// Checks one region: its name, its arguments (bare code, where a save
    /// output passed directly is fine) and, for `recompute`, its callee.
    fn region(&mut self, region: &Region) {
        match &region.name {
            Name::Static { value, span } => self.note_name(value, *span),
            Name::Dynamic(expr) => self.visit_expr(expr),
        }
        for arg in region.call.args() {
            let inner = some_inner(arg);
            if self.saved(inner).is_some() {
                self.visit_parts(inner);
            } else {
                self.visit_expr(arg);
            }
        }
        // A skipped `save` region never evaluates its callee on replay; a
        // `recompute` one does, and its receiver is not an input.
        if region.policy.kind == PolicyKind::Recompute {
            let callee = match &region.call {
                Call::Fn(call) => &*call.func,
                Call::Method(call) => &*call.receiver,
            };
            match self.saved(callee) {
                Some(saved) => {
                    self.report(callee, &saved, Site::Callee(region));
                    self.visit_parts(callee);
                }
                None => self.visit_expr(callee),
            }
        }
    }

    /// Duplicate static names (rule: outside loops, on one path).
    fn note_name(&mut self, value: &str, span: Span) {
        if self.loops > 0 {
            return;
        }
        if self.seen.contains_key(value) {
            let place = match self.mode {
                Mode::Checkpoint => "checkpoint",
                Mode::Block => "`remat!` block",
            };
            self.error(syn::Error::new(
                span,
                format!(
                    "region name `{value}` is used twice in this {place}; region names \
                     must be unique in a checkpoint: rename one of them, or compute \
                     the name at run time with `[format!(...)]`"
                ),
            ));
        } else {
            self.seen.insert(value.to_owned(), span);
        }
    }

    fn needs(&mut self, stmt: &ast::NeedsStmt) {
        for expr in &stmt.exprs {
            match self.saved(expr) {
                Some(Saved::Named { root, .. }) => {
                    self.scope().marked.insert(root);
                    self.visit_parts(expr);
                }
                Some(Saved::Anonymous(_)) => self.visit_parts(expr),
                None => {
                    let Some(ident) = plain_ident(strip_refs(expr)) else {
                        // A field, a call...: the check cannot see it.
                        self.visit_expr(expr);
                        continue;
                    };
                    let what = match self.lookup(&ident.to_string()) {
                        Some(Binding::Input) => {
                            format!("`{ident}` is an input of the checkpoint, which replay gets back as it was")
                        }
                        Some(Binding::Recomputed(region)) => format!(
                            "`{ident}` holds the output of `recompute` region `{region}`, which replay recomputes"
                        ),
                        _ => continue,
                    };
                    self.error(syn::Error::new_spanned(
                        expr,
                        format!(
                            "`needs {ident};` has no effect: {what}; `needs` is for outputs of \
                             `save` regions (and their views). Remove it"
                        ),
                    ));
                }
            }
        }
    }

    /// Whether `expr` denotes (a view of) a save output.
    fn saved(&self, expr: &Expr) -> Option<Saved> {
        match expr {
            Expr::Path(_) => {
                let ident = plain_ident(expr)?;
                let var = ident.to_string();
                match self.lookup(&var)? {
                    Binding::Saved(root) => Some(Saved::Named { root: *root, var }),
                    _ => None,
                }
            }
            Expr::Paren(e) => self.saved(&e.expr),
            Expr::Group(e) => self.saved(&e.expr),
            Expr::Reference(e) if e.mutability.is_none() => self.saved(&e.expr),
            Expr::MethodCall(e) if is_view(&e.method) => self.saved(&e.receiver),
            Expr::Index(e) => self.saved(&e.expr),
            Expr::Field(e) => self.saved(&e.base),
            Expr::Macro(_) => {
                let region = remat_expr(expr)?;
                (region.policy.kind == PolicyKind::Save).then(|| Saved::Anonymous(Box::new(region)))
            }
            _ => None,
        }
    }

    /// Checks the parts of a saved expression that are not the value itself:
    /// view arguments, indices, an inline region.
    fn visit_parts(&mut self, expr: &Expr) {
        match expr {
            Expr::Paren(e) => self.visit_parts(&e.expr),
            Expr::Group(e) => self.visit_parts(&e.expr),
            Expr::Reference(e) => self.visit_parts(&e.expr),
            Expr::MethodCall(e) => {
                self.visit_parts(&e.receiver);
                for arg in &e.args {
                    self.visit_expr(arg);
                }
            }
            Expr::Index(e) => {
                self.visit_parts(&e.expr);
                self.visit_expr(&e.index);
            }
            Expr::Field(e) => self.visit_parts(&e.base),
            Expr::Macro(_) => {
                if let Some(region) = remat_expr(expr) {
                    self.region(&region);
                }
            }
            _ => {}
        }
    }

    /// Reports a read of a save output unless it is marked or unchecked.
    fn report(&mut self, at: &dyn ToTokens, saved: &Saved, site: Site) {
        if self.unchecked > 0 {
            return;
        }
        let message = match saved {
            Saved::Named { root, var } => {
                if self.is_marked(*root) {
                    return;
                }
                let root = &self.roots[*root];
                let what = if *var == root.var {
                    format!(
                        "`{var}` holds the output of `save` region `{}`",
                        root.region
                    )
                } else {
                    format!(
                        "`{var}` is a view of `{}`, the output of `save` region `{}`",
                        root.var, root.region
                    )
                };
                match site {
                    Site::Bare => format!(
                        "{what}, which is skipped on replay; add `needs {var};` before \
                         this read, or pass `{var}` to a region"
                    ),
                    Site::Callee(region) => format!(
                        "{what}, which is skipped on replay, and `recompute` region `{}` \
                         reads it through its receiver, which is not one of its inputs; \
                         add `needs {var};` before this statement, or pass `{var}` as an \
                         argument",
                        region.name.display()
                    ),
                }
            }
            Saved::Anonymous(region) => format!(
                "this reads the output of `save` region `{}` in place, but that region is \
                 skipped on replay; bind it (`let x = save {}: ...;`), then add `needs x;` \
                 before reading it, or pass it to a region",
                region.name.display(),
                region.name.display()
            ),
        };
        self.error(syn::Error::new_spanned(at, message));
    }

    /// A value returned from the checkpoint: save outputs may leave as they
    /// are (rule 3), also inside tuples, arrays, `vec!` and branches.
    fn returned(&mut self, expr: &Expr) {
        if self.mode != Mode::Checkpoint || self.closures > 0 {
            self.visit_expr(expr);
            return;
        }
        if self.saved(expr).is_some() {
            self.visit_parts(expr);
            return;
        }
        match expr {
            Expr::Tuple(e) => e.elems.iter().for_each(|e| self.returned(e)),
            Expr::Array(e) => e.elems.iter().for_each(|e| self.returned(e)),
            Expr::Paren(e) => self.returned(&e.expr),
            Expr::Block(e) => self.block(&e.block, true),
            Expr::If(e) => self.expr_if(e, true),
            Expr::Match(e) => self.expr_match(e, true),
            Expr::Macro(e) if e.mac.path.is_ident("vec") => {
                match e
                    .mac
                    .parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated)
                {
                    Ok(elems) => elems.iter().for_each(|e| self.returned(e)),
                    Err(_) => self.any_macro(&e.mac),
                }
            }
            _ => self.visit_expr(expr),
        }
    }

    fn expr_if(&mut self, expr: &ExprIf, returned: bool) {
        let guard = recomputing_guard(&expr.cond);
        self.push();
        self.visit_expr(&expr.cond);
        let before = self.seen.clone();
        let forward_only = usize::from(guard == Some(Guard::ForwardOnly));
        self.unchecked += forward_only;
        self.block(&expr.then_branch, returned);
        self.unchecked -= forward_only;
        self.pop();
        if let Some((_, else_branch)) = &expr.else_branch {
            // Branches exclude each other: a name may appear in both.
            let after_then = std::mem::replace(&mut self.seen, before);
            let forward_only = usize::from(guard == Some(Guard::ReplayOnly));
            self.unchecked += forward_only;
            if returned {
                self.returned(else_branch);
            } else {
                self.visit_expr(else_branch);
            }
            self.unchecked -= forward_only;
            self.seen.extend(after_then);
        }
    }

    fn expr_match(&mut self, expr: &ExprMatch, returned: bool) {
        self.visit_expr(&expr.expr);
        let before = self.seen.clone();
        let mut after = before.clone();
        for arm in &expr.arms {
            self.seen = before.clone();
            self.push();
            self.bind(&arm.pat, NewBinding::Plain);
            if let Some((_, guard)) = &arm.guard {
                self.visit_expr(guard);
            }
            if returned {
                self.returned(&arm.body);
            } else {
                self.visit_expr(&arm.body);
            }
            self.pop();
            after.extend(std::mem::take(&mut self.seen));
        }
        self.seen = after;
    }

    /// A macro in bare code: `remat!` is checked as regions; any other is
    /// read as comma-separated expressions when it parses that way (with
    /// format-string captures), else its tokens are scanned for names.
    fn any_macro(&mut self, mac: &Macro) {
        if ast::is_remat(mac) {
            match parse::parse_invocation(mac.tokens.clone()).0 {
                Invocation::Expr(region) => self.region(&region),
                Invocation::Stmts(stmts) => self.remat_stmts(&stmts),
            }
            return;
        }
        match mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated) {
            Ok(args) => {
                for arg in &args {
                    if let Expr::Lit(syn::ExprLit {
                        lit: Lit::Str(lit), ..
                    }) = arg
                    {
                        self.format_captures(lit);
                    }
                    self.visit_expr(arg);
                }
            }
            Err(_) => self.scan_tokens(mac.tokens.clone()),
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
            self.read_name(&name, lit);
        }
    }

    /// Tokens of a macro that are not expressions: every free identifier
    /// naming a save output is a read.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Group(group) => self.scan_tokens(group.stream()),
                TokenTree::Ident(ident) => {
                    let punct = |t: Option<&TokenTree>, chars: &[char]| matches!(t, Some(TokenTree::Punct(p)) if chars.contains(&p.as_char()));
                    let member = i > 0 && punct(tokens.get(i - 1), &['.']);
                    let path = punct(tokens.get(i + 1), &[':', '!']);
                    if !member && !path {
                        self.read_name(&ident.to_string(), ident);
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

    fn read_name(&mut self, name: &str, at: &dyn ToTokens) {
        if let Some(Binding::Saved(root)) = self.lookup(name) {
            let saved = Saved::Named {
                root: *root,
                var: name.to_owned(),
            };
            self.report(at, &saved, Site::Bare);
        }
    }
}

impl<'ast> Visit<'ast> for Checker {
    /// Every expression reached here is read by bare code.
    fn visit_expr(&mut self, expr: &'ast Expr) {
        if let Some(saved) = self.saved(expr) {
            self.report(expr, &saved, Site::Bare);
            self.visit_parts(expr);
            return;
        }
        match expr {
            // A metadata read of a save output is fine (rule 3).
            Expr::MethodCall(call)
                if is_metadata(&call.method) && self.saved(&call.receiver).is_some() =>
            {
                self.visit_parts(&call.receiver);
                for arg in &call.args {
                    self.visit_expr(arg);
                }
            }
            Expr::If(e) => self.expr_if(e, false),
            Expr::Match(e) => self.expr_match(e, false),
            Expr::Macro(e) => self.any_macro(&e.mac),
            Expr::Return(e) => {
                if let Some(value) = &e.expr {
                    self.returned(value);
                }
            }
            Expr::Assign(e) => {
                let new = self.init(&e.right);
                match plain_ident(&e.left) {
                    // Assigning a name rebinds what it holds.
                    Some(ident) => {
                        let var = ident.to_string();
                        let binding = match new {
                            NewBinding::Alias(root) => Binding::Saved(root),
                            NewBinding::Save(region) => {
                                self.roots.push(Root {
                                    var: var.clone(),
                                    region,
                                });
                                Binding::Saved(self.roots.len() - 1)
                            }
                            NewBinding::Recomputed(region) => Binding::Recomputed(region),
                            NewBinding::Input => Binding::Input,
                            NewBinding::Plain => Binding::Plain,
                        };
                        if let Some(scope) = self
                            .scopes
                            .iter_mut()
                            .rev()
                            .find(|s| s.names.contains_key(&var))
                        {
                            scope.names.insert(var, binding);
                        }
                    }
                    None => self.visit_expr(&e.left),
                }
            }
            _ => visit::visit_expr(self, expr),
        }
    }

    fn visit_block(&mut self, block: &'ast syn::Block) {
        self.block(block, false);
    }

    fn visit_stmt(&mut self, stmt: &'ast syn::Stmt) {
        self.stmt(stmt);
    }

    fn visit_expr_if(&mut self, expr: &'ast ExprIf) {
        self.expr_if(expr, false);
    }

    fn visit_expr_match(&mut self, expr: &'ast ExprMatch) {
        self.expr_match(expr, false);
    }

    fn visit_expr_let(&mut self, expr: &'ast syn::ExprLet) {
        self.visit_expr(&expr.expr);
        self.bind(&expr.pat, NewBinding::Plain);
    }

    fn visit_expr_for_loop(&mut self, expr: &'ast syn::ExprForLoop) {
        self.visit_expr(&expr.expr);
        self.loops += 1;
        self.push();
        self.bind(&expr.pat, NewBinding::Plain);
        self.block(&expr.body, false);
        self.pop();
        self.loops -= 1;
    }

    fn visit_expr_while(&mut self, expr: &'ast syn::ExprWhile) {
        self.loops += 1;
        self.push();
        self.visit_expr(&expr.cond);
        self.block(&expr.body, false);
        self.pop();
        self.loops -= 1;
    }

    fn visit_expr_loop(&mut self, expr: &'ast syn::ExprLoop) {
        self.loops += 1;
        self.block(&expr.body, false);
        self.loops -= 1;
    }

    fn visit_expr_closure(&mut self, expr: &'ast syn::ExprClosure) {
        // A closure may run any number of times, and `return` in it does not
        // leave the checkpoint.
        self.loops += 1;
        self.closures += 1;
        self.push();
        for input in &expr.inputs {
            self.bind(input, NewBinding::Plain);
        }
        self.visit_expr(&expr.body);
        self.pop();
        self.closures -= 1;
        self.loops -= 1;
    }

    fn visit_macro(&mut self, mac: &'ast Macro) {
        self.any_macro(mac);
    }

    /// Nested items see none of the body's locals.
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

fn region_binding(region: &Region) -> NewBinding {
    match region.policy.kind {
        PolicyKind::Save => NewBinding::Save(region.name.display()),
        PolicyKind::Recompute => NewBinding::Recomputed(region.name.display()),
    }
}

/// A `remat!(POLICY REGION)` expression, parsed.
fn remat_expr(expr: &Expr) -> Option<Region> {
    let Expr::Macro(mac) = expr else { return None };
    if !ast::is_remat(&mac.mac) {
        return None;
    }
    match parse::parse_invocation(mac.mac.tokens.clone()).0 {
        Invocation::Expr(region) => Some(region),
        Invocation::Stmts(_) => None,
    }
}

/// The names a pattern binds.
pub(crate) fn pat_names(pat: &Pat) -> Vec<Ident> {
    struct Names(Vec<Ident>);
    impl<'ast> Visit<'ast> for Names {
        fn visit_pat_ident(&mut self, pat: &'ast syn::PatIdent) {
            self.0.push(pat.ident.clone());
            visit::visit_pat_ident(self, pat);
        }
        fn visit_expr(&mut self, _: &'ast Expr) {}
        fn visit_type(&mut self, _: &'ast syn::Type) {}
    }
    let mut names = Names(Vec::new());
    names.visit_pat(pat);
    names.0
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

fn strip_refs(expr: &Expr) -> &Expr {
    match expr {
        Expr::Reference(e) => strip_refs(&e.expr),
        Expr::Paren(e) => strip_refs(&e.expr),
        Expr::Group(e) => strip_refs(&e.expr),
        _ => expr,
    }
}

/// `Some(x)` passes `x` as directly as `x` does.
fn some_inner(expr: &Expr) -> &Expr {
    if let Expr::Call(call) = expr {
        if call.args.len() == 1 && matches!(&*call.func, Expr::Path(p) if p.path.is_ident("Some")) {
            return &call.args[0];
        }
    }
    expr
}

/// Pure view methods of `Tensor` (rule 2). In-place variants (`squeeze_`)
/// are not views.
fn is_view(method: &Ident) -> bool {
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
