//! The `remat!` invocations of a `#[checkpoint]` body, parsed once.
//!
//! The check and the expansion both read each invocation, and they must
//! agree on it: the check decides which statements the expansion drops (a
//! `needs` of a name that does not exist, `let a = save;`), so that rustc
//! does not report the same name again (E0425) after our error. Spans
//! cannot be compared on stable Rust, so nothing in the two passes could
//! tell that they hold the same statement. Instead, before either runs,
//! every invocation is parsed into a table and its tokens in the body are
//! replaced by its index there: both passes then read the same parsed
//! statements, and the check's decisions (`Cell`s in `ast`) reach the
//! expansion.

use std::rc::Rc;

use proc_macro2::{Literal, Span, TokenStream, TokenTree};
use quote::quote;
use syn::visit_mut::{self, VisitMut};
use syn::Macro;

use crate::ast::{self, Call, Invocation, Name, Region, Stmt};
use crate::parse;

/// One parsed invocation and its parse errors.
pub(crate) struct Parsed {
    pub invocation: Invocation,
    pub errors: Option<syn::Error>,
}

/// The parsed invocations, by index.
#[derive(Default)]
pub(crate) struct Table {
    parsed: Vec<Rc<Parsed>>,
}

/// The name of the marker that replaces an invocation's tokens. It is
/// reserved like every `__remat_` name, and only looked up in a body that
/// went through `collect`.
const MARKER: &str = "__remat_parsed";

impl Table {
    /// The invocation `mac`: from the table if `mac` holds a marker, else
    /// parsed now (a standalone block, which has no table).
    pub(crate) fn get(&self, mac: &Macro) -> Rc<Parsed> {
        self.index(&mac.tokens)
            .and_then(|i| self.parsed.get(i).cloned())
            .unwrap_or_else(|| Rc::new(parse_now(mac.tokens.clone())))
    }

    fn index(&self, tokens: &TokenStream) -> Option<usize> {
        let mut tokens = tokens.clone().into_iter();
        let (Some(TokenTree::Ident(marker)), Some(TokenTree::Literal(index)), None) =
            (tokens.next(), tokens.next(), tokens.next())
        else {
            return None;
        };
        if marker != MARKER {
            return None;
        }
        index.to_string().parse().ok()
    }
}

fn parse_now(tokens: TokenStream) -> Parsed {
    let (invocation, errors) = parse::parse_invocation(tokens);
    Parsed { invocation, errors }
}

/// Parses every `remat!` of `block` in statement or expression position
/// (outside nested items, which rustc expands on their own), including
/// those in the bare code of other invocations, and replaces each by its
/// marker.
pub(crate) fn collect(block: &mut syn::Block) -> Rc<Table> {
    let mut collect = Collect::default();
    collect.visit_block_mut(block);
    Rc::new(collect.table)
}

#[derive(Default)]
struct Collect {
    table: Table,
}

impl Collect {
    fn take(&mut self, mac: &mut Macro) {
        let mut parsed = parse_now(std::mem::take(&mut mac.tokens));
        self.invocation(&mut parsed.invocation);
        let index = Literal::usize_unsuffixed(self.table.parsed.len());
        let marker = proc_macro2::Ident::new(MARKER, Span::call_site());
        mac.tokens = quote!(#marker #index);
        self.table.parsed.push(Rc::new(parsed));
    }

    /// The syn parts of a parsed invocation, which may hold more `remat!`s.
    fn invocation(&mut self, invocation: &mut Invocation) {
        match invocation {
            Invocation::Expr(region) => self.region(region),
            Invocation::Stmts(stmts) => self.stmts(stmts),
        }
    }

    fn stmts(&mut self, stmts: &mut [Stmt]) {
        for stmt in stmts {
            match stmt {
                Stmt::Region(stmt) => self.region(&mut stmt.region),
                Stmt::Needs(stmt) => {
                    for expr in &mut stmt.exprs {
                        self.visit_expr_mut(expr);
                    }
                }
                Stmt::Scope(stmt) => {
                    if let Name::Dynamic(expr) = &mut stmt.name {
                        self.visit_expr_mut(expr);
                    }
                    self.stmts(&mut stmt.stmts);
                }
                Stmt::Bare(stmt) => self.visit_stmt_mut(stmt),
                // `let PAT = save;`: no expression to look into.
                Stmt::MissingCall(_) => {}
            }
        }
    }

    fn region(&mut self, region: &mut Region) {
        if let Some(expr) = &mut region.policy_expr {
            self.visit_expr_mut(expr);
        }
        if let Name::Dynamic(expr) = &mut region.name {
            self.visit_expr_mut(expr);
        }
        match &mut region.call {
            Call::Fn(call) => self.visit_expr_call_mut(call),
            Call::Method(call) => self.visit_expr_method_call_mut(call),
        }
    }
}

impl VisitMut for Collect {
    fn visit_stmt_macro_mut(&mut self, stmt: &mut syn::StmtMacro) {
        if ast::is_remat(&stmt.mac) {
            self.take(&mut stmt.mac);
        } else {
            visit_mut::visit_stmt_macro_mut(self, stmt);
        }
    }

    fn visit_expr_macro_mut(&mut self, expr: &mut syn::ExprMacro) {
        if ast::is_remat(&expr.mac) {
            self.take(&mut expr.mac);
        } else {
            visit_mut::visit_expr_macro_mut(self, expr);
        }
    }

    /// Same as the check and `ExpandNested`: a nested item is not part of
    /// the checkpoint.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
