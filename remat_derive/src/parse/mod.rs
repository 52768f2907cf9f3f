//! Parsing `remat!` into the model of `ast`.
//!
//! `save`, `recompute`, `needs` and `scope` are not Rust keywords, so every
//! statement is first classified by looking ahead (a statement that starts
//! with `save` followed by `(` is an ordinary call of a function named `save`),
//! then parsed either as one of ours or as an ordinary `syn::Stmt`. A
//! malformed statement is reported and skipped, so that one error does not
//! hide the others.
//!
//! `lookahead` classifies, `region` parses regions and names; the
//! statements and the recovery from malformed ones are here.

mod lookahead;
mod region;

use std::cell::Cell;

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::discouraged::Speculative;
use syn::parse::ParseStream;
use syn::{token, Attribute, Expr, Ident, Token};

use crate::ast::{Invocation, MissingCall, NeedsStmt, Region, RegionStmt, ScopeStmt, Stmt};
use crate::errors::{parse_to_end, push_error};
use crate::parse::lookahead::{classify, parse_let_head, Kind};
pub(crate) use crate::parse::region::missing_call;
use crate::parse::region::{parse_name, parse_region, REGION_FORM};
use crate::unchecked_attr;

/// Parses the input of one `remat!` invocation. Malformed statements are
/// skipped and reported, so that the rest still parses, is checked and
/// expands: the returned error (if any) lists every malformed statement.
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

fn parse_stmt(
    input: ParseStream,
    tail: bool,
    errors: &mut Option<syn::Error>,
) -> syn::Result<Stmt> {
    if input.peek(Token![#]) && input.peek2(Token![!]) {
        let attrs = input.call(Attribute::parse_inner)?;
        return Err(syn::Error::new_spanned(
            &attrs[0],
            "inner attributes are not supported in `remat!`; to silence the check \
             for one statement, put `#[remat(unchecked)]` on that statement",
        ));
    }
    // Classify on a fork, past the outer attributes.
    let kind = {
        let fork = input.fork();
        fork.call(Attribute::parse_outer)?;
        classify(&fork)
    };
    match kind {
        Kind::Bare => {
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
        Kind::MissingCall => {
            let Ok(syn::Stmt::Local(local)) = input.parse::<syn::Stmt>() else {
                return Err(input.error(format!("expected a region: {REGION_FORM}")));
            };
            let keyword = match local.init.as_ref().map(|init| &*init.expr) {
                Some(Expr::Path(path)) => path.path.get_ident().cloned(),
                _ => None,
            };
            let Some(keyword) = keyword else {
                return Err(syn::Error::new_spanned(
                    &local,
                    format!("expected a region: {REGION_FORM}"),
                ));
            };
            Ok(Stmt::MissingCall(Box::new(MissingCall {
                local,
                keyword,
                refused: Cell::new(false),
            })))
        }
        Kind::Region | Kind::LetRegion => {
            let (attrs, unchecked) = unchecked_attr::split(input.call(Attribute::parse_outer)?)?;
            let pat = match kind {
                Kind::LetRegion => Some(parse_let_head(input)?),
                _ => None,
            };
            let region = parse_region(input)?;
            expect_semi(input, &region)?;
            Ok(Stmt::Region(Box::new(RegionStmt {
                attrs,
                unchecked: unchecked.is_some(),
                pat,
                region,
            })))
        }
        Kind::Needs => {
            let attrs = input.call(Attribute::parse_outer)?;
            if let Some(attr) = attrs.first() {
                return Err(syn::Error::new_spanned(
                    attr,
                    "attributes have no effect on `needs`; remove this attribute",
                ));
            }
            parse_needs(input).map(Stmt::Needs)
        }
        Kind::Scope => {
            let (attrs, unchecked) = unchecked_attr::split(input.call(Attribute::parse_outer)?)?;
            if let Some(attr) = attrs.first() {
                return Err(syn::Error::new_spanned(
                    attr,
                    "a `scope` takes no attributes other than `#[remat(unchecked)]`",
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
            Ok(Stmt::Scope(ScopeStmt {
                unchecked: unchecked.is_some(),
                scope,
                name,
                stmts,
            }))
        }
    }
}
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

/// `needs EXPR (, EXPR)* ;`
fn parse_needs(input: ParseStream) -> syn::Result<NeedsStmt> {
    const FORM: &str = "`needs x;` or `needs x, y;`";
    let needs = input.call(Ident::parse_any)?;
    let mut exprs = Vec::new();
    loop {
        let expr: Expr = input
            .parse()
            .map_err(|error| syn::Error::new(error.span(), format!("{error}; expected {FORM}")))?;
        exprs.push(expr);
        if input.peek(Token![,]) {
            input.parse::<Token![,]>()?;
            if input.peek(Token![;]) {
                break;
            }
            continue;
        }
        break;
    }
    if !input.peek(Token![;]) {
        return Err(input.error(format!("expected `,` or `;` here: {FORM}")));
    }
    input.parse::<Token![;]>()?;
    let dropped = exprs.iter().map(|_| Cell::new(false)).collect();
    Ok(NeedsStmt {
        needs,
        exprs,
        dropped,
    })
}
