//! Lowering statements: Rust's (`let`, expression statements, items, macro
//! statements), `remat!`'s (regions, `needs`, `scope`, `let x = save;`), and
//! the attributes that change how one is checked (`#[remat(unchecked)]`,
//! `#[cfg]`).

use quote::ToTokens;
use syn::{Expr, Pat};

use super::Lower;
use crate::ast::{self, Invocation, Mode, Name};
use crate::check::ir::{Node, Operand};
use crate::check::place::{plain_ident, strip};
use crate::check::scope::Kind;
use crate::check::valid::{self, Needs};
use crate::unchecked_attr;

impl Lower {
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
                    self.maybe_cfg(cfg, |this| {
                        let op = this.region(&stmt.region);
                        if let Some(pat) = &stmt.pat {
                            this.bind_region_output(pat, &stmt.region, op);
                        }
                    });
                    self.unchecked -= usize::from(stmt.unchecked);
                }
                ast::Stmt::Needs(stmt) => self.needs(stmt),
                ast::Stmt::MissingCall(stmt) => {
                    if self.scopes.resolve(&stmt.keyword.to_string()).is_some() {
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

    /// Runs `f` with the statement's `#[remat(unchecked)]` in force, and
    /// makes it optional under `#[cfg]`.
    pub(super) fn with_attrs(&mut self, stmt: &syn::Stmt, f: impl FnOnce(&mut Self)) {
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
        self.maybe_cfg(cfg, f);
        self.unchecked -= usize::from(unchecked);
    }

    pub(super) fn stmt(&mut self, stmt: &syn::Stmt) {
        self.with_attrs(stmt, |this| match stmt {
            syn::Stmt::Local(local) => this.local(local),
            syn::Stmt::Item(syn::Item::Macro(item)) => {
                if let Some(ident) = &item.ident {
                    this.macros
                        .insert(ident.to_string(), item.mac.tokens.clone());
                }
            }
            // A nested item is code of its own (rustc expands its `remat!`s
            // separately), not part of the checkpoint.
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
            let arm = self.nodes(|this| {
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
        let referent = self.referent(&init.expr);
        let op = self.value(&init.expr);
        self.bind_pat(&local.pat, op, &Kind::Plain);
        if let Some(r) = referent {
            self.bind_refs(&local.pat, r, true);
        }
        if closure {
            if let Pat::Ident(p) = &local.pat {
                if let Some(id) = self.scopes.resolve(&p.ident.to_string()) {
                    self.closure_sites
                        .insert(id, (before..self.sites.len()).collect());
                }
            }
        }
    }

    fn needs(&mut self, stmt: &ast::NeedsStmt) {
        for (expr, dropped) in stmt.exprs.iter().zip(&stmt.dropped) {
            let op = self.value(expr);
            if let Some(ident) = plain_ident(strip(expr)) {
                let name = ident.to_string();
                let at = expr.to_token_stream();
                let kind = self.scopes.resolve(&name).map(|id| self.scopes.kind(id));
                let similar = || self.scopes.similar(&name);
                match valid::needs(&at, &name, kind, self.mode, self.opaque_macro, similar) {
                    Needs::Marks => {}
                    Needs::NoEffect(error) => {
                        self.error(error);
                        continue;
                    }
                    Needs::Unknown(error) => {
                        self.error(error);
                        dropped.set(true);
                        continue;
                    }
                }
            }
            if self.replay_only == 0 {
                self.emit(Node::Needs(op));
            }
        }
    }
}
