//! How code names a place, read off the syntax: `x`, `h.t`, `v[0]`, behind
//! references, parentheses and views. Nothing here resolves names (the
//! lowering does, in its scopes); this takes expressions apart, and writes
//! places back as the user wrote them, for messages.

use quote::ToTokens;
use syn::{Expr, Ident, Lit};

use crate::ast::compact;
use crate::check::vocab::is_view;

/// `x` (a single identifier path).
pub(crate) fn plain_ident(expr: &Expr) -> Option<&Ident> {
    match expr {
        Expr::Path(path) if path.qself.is_none() => path.path.get_ident(),
        Expr::Paren(e) => plain_ident(&e.expr),
        Expr::Group(e) => plain_ident(&e.expr),
        _ => None,
    }
}

/// The expression under references and parentheses, which carry its value
/// unchanged.
pub(crate) fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Reference(e) => strip(&e.expr),
        Expr::Paren(e) => strip(&e.expr),
        Expr::Group(e) => strip(&e.expr),
        _ => expr,
    }
}

/// The place an expression reads, as written, without references and
/// views: `h.t` for `&h.t.view([-1])`.
pub(crate) fn place_text(expr: &Expr) -> Option<String> {
    fn base(expr: &Expr) -> Option<&Expr> {
        match expr {
            Expr::Reference(e) => base(&e.expr),
            Expr::Paren(e) => base(&e.expr),
            Expr::Group(e) => base(&e.expr),
            Expr::Unary(e) if matches!(e.op, syn::UnOp::Deref(_)) => base(&e.expr),
            Expr::MethodCall(e) if is_view(&e.method, &e.args) => base(&e.receiver),
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

/// `0` in `v[0]`. A literal index picks one element of a multi-tensor
/// output, which `needs v[0]` can mark alone; any other index may be any
/// element.
pub(crate) fn literal_index(expr: &Expr) -> Option<u32> {
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse().ok(),
        Expr::Paren(e) => literal_index(&e.expr),
        _ => None,
    }
}

/// A field's name, or a tuple field's number, as the IR's projections hold
/// it.
pub(crate) fn member(member: &syn::Member) -> String {
    match member {
        syn::Member::Named(ident) => ident.to_string(),
        syn::Member::Unnamed(index) => index.index.to_string(),
    }
}
