//! Parsing `remat!` into the model of `ast`.
//!
//! `save`, `recompute`, `needs` and `scope` are not Rust keywords, so every
//! statement is first classified by looking ahead (a statement that starts
//! with `save` followed by `(` is an ordinary call of a function named `save`),
//! then parsed either as one of ours or as an ordinary `syn::Stmt`. A
//! malformed statement is reported and skipped, so that one error does not
//! hide the others.
//!
//! `lookahead` classifies, `region` parses regions and names (defaulted by
//! `default_name`), `needs` the `needs` statement; `compact` writes code
//! into messages. The statements and the recovery from malformed ones are
//! here.

pub(crate) mod compact;
pub(crate) mod default_name;
mod lookahead;
mod needs;
mod region;

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::discouraged::Speculative;
use syn::parse::ParseStream;
use syn::{token, Attribute, Expr, Ident, Token};

use crate::errors::{parse_to_end, push_error};
use crate::remat_block::ast::{Invocation, Region, RegionStmt, ScopeStmt, Stmt};
use crate::remat_block::parse::lookahead::{classify, parse_let_head, Kind};
use crate::remat_block::parse::needs::parse_needs;
use crate::remat_block::parse::region::{parse_name, parse_region, REGION_FORM};

/// Parses the input of one `remat!` invocation. Malformed statements are
/// skipped and reported, so that the rest still parses and expands: the
/// returned error (if any) lists every malformed statement.
pub(crate) fn parse_invocation(tokens: TokenStream) -> (Invocation, Option<syn::Error>) {
    let expr_form = |input: ParseStream| {
        let region = parse_region(input)?;
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the region"));
        }
        Ok(region)
    };
    // The expression form is a single region with nothing after it; any other
    // input is a block of statements.
    let first = parse_to_end(expr_form, tokens.clone());
    if let Ok(region) = first {
        return (Invocation::Expr(Box::new(region)), None);
    }
    let mut errors = None;
    let stmts = parse_to_end(
        |input: ParseStream| Ok(parse_stmts(input, true, &mut errors)),
        tokens,
    )
    .unwrap_or_default();
    (Invocation::Stmts(stmts), errors)
}

/// Parses statements until the stream ends, skipping malformed ones. A
/// trailing expression (no `;`) may end the macro's input, not a `scope`.
fn parse_stmts(input: ParseStream, tail: bool, errors: &mut Option<syn::Error>) -> Vec<Stmt> {
    let mut stmts = Vec::new();
    while !input.is_empty() {
        let fork = input.fork();
        match parse_stmt(&fork, tail, errors) {
            Ok(stmt) => {
                input.advance_to(&fork);
                stmts.push(stmt);
            }
            Err(error) => {
                push_error(errors, error);
                skip_stmt(input);
            }
        }
    }
    stmts
}

/// Recovery after a malformed statement: skip to just after the next `;` at
/// this level, or after a braced group (the end of `scope x { }`, `for`, ...).
fn skip_stmt(input: ParseStream) {
    while !input.is_empty() {
        if input.peek(Token![;]) {
            let _ = input.parse::<Token![;]>();
            return;
        }
        let brace = input.peek(token::Brace);
        if input.parse::<proc_macro2::TokenTree>().is_err() {
            return;
        }
        if brace && !input.peek(Token![else]) {
            let _ = input.parse::<Option<Token![;]>>();
            return;
        }
    }
}

/// One statement, parsed as what its first tokens say it is.
fn parse_stmt(
    input: ParseStream,
    tail: bool,
    errors: &mut Option<syn::Error>,
) -> syn::Result<Stmt> {
    if input.peek(Token![#]) && input.peek2(Token![!]) {
        let attrs = input.call(Attribute::parse_inner)?;
        return Err(syn::Error::new_spanned(
            &attrs[0],
            "inner attributes are not supported in `remat!`",
        ));
    }
    // Classify on a fork, past the outer attributes.
    let kind = {
        let fork = input.fork();
        fork.call(Attribute::parse_outer)?;
        classify(&fork)
    };
    match kind {
        Kind::Bare => parse_bare(input, tail),
        Kind::Region | Kind::LetRegion => parse_region_stmt(input, kind),
        Kind::Needs => {
            // The statement is `let`s: `#[cfg(..)]` and lints apply to each.
            let attrs = input.call(Attribute::parse_outer)?;
            parse_needs(input, attrs).map(Stmt::Needs)
        }
        Kind::Scope => parse_scope(input, errors),
    }
}

/// Ordinary Rust, or the trailing expression of the input.
fn parse_bare(input: ParseStream, tail: bool) -> syn::Result<Stmt> {
    let fork = input.fork();
    let error = match fork.parse::<syn::Stmt>() {
        Ok(stmt) => {
            input.advance_to(&fork);
            return Ok(Stmt::Bare(Box::new(stmt)));
        }
        Err(error) => error,
    };
    // A trailing expression without `;` ends the block, as in Rust.
    let fork = input.fork();
    match fork.parse::<Expr>() {
        Ok(expr) if tail && fork.is_empty() => {
            input.advance_to(&fork);
            Ok(Stmt::Bare(Box::new(syn::Stmt::Expr(expr, None))))
        }
        _ => Err(error),
    }
}

/// `[let PAT =] POLICY REGION ;`
fn parse_region_stmt(input: ParseStream, kind: Kind) -> syn::Result<Stmt> {
    let attrs = input.call(Attribute::parse_outer)?;
    let pat = match kind {
        Kind::LetRegion => Some(parse_let_head(input)?),
        _ => None,
    };
    let region = parse_region(input)?;
    expect_semi(input, &region)?;
    Ok(Stmt::Region(Box::new(RegionStmt { attrs, pat, region })))
}

/// `scope NAME { STMT* }`, whose statements are parsed and recovered as the
/// block's own.
fn parse_scope(input: ParseStream, errors: &mut Option<syn::Error>) -> syn::Result<Stmt> {
    let attrs = input.call(Attribute::parse_outer)?;
    if let Some(attr) = attrs.first() {
        return Err(syn::Error::new_spanned(
            attr,
            "a `scope` takes no attributes",
        ));
    }
    let scope = input.call(Ident::parse_any)?;
    let name = parse_name(input, "scope")?
        .ok_or_else(|| syn::Error::new(scope.span(), "expected `scope NAME { ... }`"))?;
    if !input.peek(token::Brace) {
        return Err(input.error("expected `{` after the scope name: `scope NAME { ... }`"));
    }
    let content;
    syn::braced!(content in input);
    let stmts = parse_stmts(&content, false, errors);
    Ok(Stmt::Scope(ScopeStmt { scope, name, stmts }))
}

/// The `;` that ends a region statement: a region runs one call, so
/// anything else after it is a mistake worth naming.
fn expect_semi(input: ParseStream, region: &Region) -> syn::Result<()> {
    if input.peek(Token![;]) {
        input.parse::<Token![;]>()?;
        return Ok(());
    }
    Err(input.error(format!(
        "expected `;` after the `{}` region statement; a region statement runs \
         exactly one call: {REGION_FORM}",
        region.policy.keyword()
    )))
}
