//! `#[remat(unchecked)]`: the check's escape hatch for one statement.
//!
//! The attribute is inert: the macros read it, then strip it from their
//! output, since no attribute named `remat` exists for rustc to resolve.
//! Finding it means reading a statement's attributes where syn keeps them
//! (an expression statement's are on the expression), which is here too,
//! with the way back (`add_attrs`) for the expansion.

use proc_macro2::Span;
use syn::visit_mut::{self, VisitMut};
use syn::{AttrStyle, Attribute, Expr, Meta};

const FORM: &str = "expected `#[remat(unchecked)]`";

fn is_remat(attr: &Attribute) -> bool {
    attr.path().is_ident("remat")
}

/// Validates one `#[remat(...)]` attribute, returning its span.
fn validate(attr: &Attribute) -> syn::Result<Span> {
    if let AttrStyle::Inner(_) = attr.style {
        return Err(syn::Error::new_spanned(
            attr,
            "`#![remat(...)]` is not supported; put `#[remat(unchecked)]` on the \
             statement whose reads the check should skip",
        ));
    }
    let Meta::List(list) = &attr.meta else {
        return Err(syn::Error::new_spanned(attr, FORM));
    };
    let option: syn::Ident = list
        .parse_args()
        .map_err(|_| match list.tokens.is_empty() {
            // `#[remat()]`: no tokens to point at, the parentheses instead.
            true => syn::Error::new(list.delimiter.span().join(), FORM),
            false => syn::Error::new_spanned(&list.tokens, FORM),
        })?;
    if option != "unchecked" {
        return Err(syn::Error::new_spanned(
            option,
            "unknown `remat` option; the only one is `#[remat(unchecked)]`",
        ));
    }
    Ok(list.path.segments[0].ident.span())
}

/// Separates the `#[remat(...)]` attributes from the others: returns the
/// others and the span of `#[remat(unchecked)]` if present.
pub(crate) fn split(attrs: Vec<Attribute>) -> syn::Result<(Vec<Attribute>, Option<Span>)> {
    let mut kept = Vec::new();
    let mut unchecked = None;
    for attr in attrs {
        if is_remat(&attr) {
            unchecked = Some(validate(&attr)?);
        } else {
            kept.push(attr);
        }
    }
    Ok((kept, unchecked))
}

/// Whether `attrs` hold a valid `#[remat(unchecked)]`; malformed `remat`
/// attributes are errors.
pub(crate) fn unchecked(attrs: &[Attribute]) -> syn::Result<bool> {
    let mut found = false;
    let mut errors: Option<syn::Error> = None;
    for attr in attrs.iter().filter(|a| is_remat(a)) {
        match validate(attr) {
            Ok(_) => found = true,
            Err(error) => crate::errors::push_error(&mut errors, error),
        }
    }
    match errors {
        Some(errors) => Err(errors),
        None => Ok(found),
    }
}

/// The outer attributes of a statement (where syn keeps those of an
/// expression statement: on the expression).
pub(crate) fn stmt_attrs(stmt: &syn::Stmt) -> &[Attribute] {
    match stmt {
        syn::Stmt::Local(local) => &local.attrs,
        syn::Stmt::Macro(mac) => &mac.attrs,
        syn::Stmt::Expr(expr, _) => expr_attrs(expr),
        syn::Stmt::Item(_) => &[],
    }
}

macro_rules! expr_attrs {
    ($expr:expr, $($variant:ident)*) => {
        match $expr {
            $(Expr::$variant(e) => Some(&mut e.attrs),)*
            _ => None,
        }
    };
}

fn expr_attrs_mut(expr: &mut Expr) -> Option<&mut Vec<Attribute>> {
    expr_attrs!(expr, Array Assign Async Await Binary Block Break Call Cast
        Closure Const Continue Field ForLoop Group If Index Infer Let Lit Loop
        Macro Match MethodCall Paren Path Range RawAddr Reference Repeat Return
        Struct Try TryBlock Tuple Unary Unsafe While Yield)
}

fn expr_attrs(expr: &Expr) -> &[Attribute] {
    // Same variants as `expr_attrs_mut`; cloning is avoided by a second match.
    macro_rules! get {
        ($($variant:ident)*) => {
            match expr {
                $(Expr::$variant(e) => &e.attrs,)*
                _ => &[],
            }
        };
    }
    get!(Array Assign Async Await Binary Block Break Call Cast Closure Const
        Continue Field ForLoop Group If Index Infer Let Lit Loop Macro Match
        MethodCall Paren Path Range RawAddr Reference Repeat Return Struct Try
        TryBlock Tuple Unary Unsafe While Yield)
}

/// Puts `attrs` (e.g. the `#[cfg]` of a `remat!` statement) on a generated
/// statement.
pub(crate) fn add_attrs(stmt: &mut syn::Stmt, attrs: &[Attribute]) {
    let target = match stmt {
        syn::Stmt::Local(local) => Some(&mut local.attrs),
        syn::Stmt::Macro(mac) => Some(&mut mac.attrs),
        syn::Stmt::Expr(expr, _) => expr_attrs_mut(expr),
        syn::Stmt::Item(_) => None,
    };
    if let Some(target) = target {
        let mut all = attrs.to_vec();
        all.append(target);
        *target = all;
    }
}

/// Removes every `#[remat(...)]` attribute from statements (at any depth,
/// outside nested items).
pub(crate) struct Strip;

impl VisitMut for Strip {
    fn visit_stmt_mut(&mut self, stmt: &mut syn::Stmt) {
        match stmt {
            syn::Stmt::Local(local) => local.attrs.retain(|a| !is_remat(a)),
            syn::Stmt::Macro(mac) => mac.attrs.retain(|a| !is_remat(a)),
            syn::Stmt::Expr(expr, _) => {
                if let Some(attrs) = expr_attrs_mut(expr) {
                    attrs.retain(|a| !is_remat(a));
                }
            }
            syn::Stmt::Item(_) => {}
        }
        visit_mut::visit_stmt_mut(self, stmt);
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
