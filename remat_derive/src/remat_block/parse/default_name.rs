//! Default region names, taken from the callee.
//!
//! `attention(&h)` and `ops::attention(&h)` are `attention`;
//! `self.attention.forward(&h)` is `attention` (the receiver's last field,
//! since the method is usually the uninformative `forward`); `mlp.forward(x)`
//! on a local `mlp` is `mlp`. Anything else (`self.forward(x)`,
//! `self.layers[i].forward(x)`, `self.0.forward(x)`) has no clear name, and
//! the user must write one.

use syn::ext::IdentExt;
use syn::{Expr, Member};

use crate::closure_self::CLOSURE_SELF;
use crate::name::Name;
use crate::remat_block::ast::Call;

/// The default name of a region running `call`, if one is clear.
pub(crate) fn default_name(call: &Call) -> Option<Name> {
    let ident = match call {
        Call::Fn(call) => callee_name(&call.func)?,
        Call::Method(call) => receiver_name(&call.receiver)?,
    };
    Some(Name::Static {
        value: ident.unraw().to_string(),
        span: ident.span(),
    })
}

/// The expression inside parentheses, invisible groups and `&`, which
/// change nothing about what is called.
fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Paren(e) => strip(&e.expr),
        Expr::Group(e) => strip(&e.expr),
        Expr::Reference(e) => strip(&e.expr),
        _ => expr,
    }
}

/// The function of a call: a path's last segment, or a field holding a
/// callable (`(self.attention)(&h)`).
fn callee_name(func: &Expr) -> Option<&syn::Ident> {
    match strip(func) {
        Expr::Path(path) => {
            let ident = &path.path.segments.last()?.ident;
            (!is_self(ident)).then_some(ident)
        }
        Expr::Field(field) => named_member(&field.member),
        _ => None,
    }
}

/// The receiver of a method call: its last field, or a plain local.
fn receiver_name(receiver: &Expr) -> Option<&syn::Ident> {
    match strip(receiver) {
        Expr::Field(field) => named_member(&field.member),
        Expr::Path(path) if path.qself.is_none() && path.path.segments.len() == 1 => {
            let ident = &path.path.segments[0].ident;
            (!is_self(ident)).then_some(ident)
        }
        _ => None,
    }
}

/// A named field (`self.attention`), not a tuple index (`self.0`).
fn named_member(member: &Member) -> Option<&syn::Ident> {
    match member {
        Member::Named(ident) => Some(ident),
        Member::Unnamed(_) => None,
    }
}

/// `self`, `Self`, or `self` as a `#[checkpoint]` body holds it (renamed
/// before rustc expands the `remat!` blocks inside).
fn is_self(ident: &syn::Ident) -> bool {
    ident == "self" || ident == "Self" || ident == CLOSURE_SELF
}
