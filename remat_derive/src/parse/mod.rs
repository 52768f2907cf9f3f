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

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::discouraged::Speculative;
use syn::parse::ParseStream;
use syn::{token, Attribute, Expr, Ident, Token};

use crate::ast::{Invocation, NeedsStmt, Region, RegionStmt, ScopeStmt, Stmt};
use crate::errors::{parse_to_end, push_error};
use crate::parse::lookahead::{classify, parse_let_head, Kind};
use crate::parse::region::{parse_name, parse_region, REGION_FORM};

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
        Kind::Region | Kind::LetRegion => {
            let attrs = input.call(Attribute::parse_outer)?;
            let pat = match kind {
                Kind::LetRegion => Some(parse_let_head(input)?),
                _ => None,
            };
            let region = parse_region(input)?;
            expect_semi(input, &region)?;
            Ok(Stmt::Region(Box::new(RegionStmt { attrs, pat, region })))
        }
        Kind::Needs => {
            // The statement is `let`s: `#[cfg(..)]` and lints apply to each.
            let attrs = input.call(Attribute::parse_outer)?;
            parse_needs(input, attrs).map(Stmt::Needs)
        }
        Kind::Scope => {
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

/// `needs NAME (, NAME)* ;`
///
/// docs/dsl.md, rule T2: the statement rebinds each name to its marked
/// value, so it takes local names; anything else is marked where it is read,
/// with the expression form.
fn parse_needs(input: ParseStream, attrs: Vec<Attribute>) -> syn::Result<NeedsStmt> {
    const FORM: &str = "`needs x;` or `needs x, y;`";
    let needs = input.call(Ident::parse_any)?;
    let mut names = Vec::new();
    loop {
        let expr: Expr = input
            .parse()
            .map_err(|error| syn::Error::new(error.span(), format!("{error}; expected {FORM}")))?;
        let name = |e: &Expr| match e {
            Expr::Path(path) if path.qself.is_none() => path.path.get_ident().cloned(),
            _ => None,
        };
        match &expr {
            _ if name(&expr).is_some() => names.extend(name(&expr)),
            Expr::Reference(r) if name(&r.expr).is_some() => {
                let name = crate::ast::compact(&quote::ToTokens::to_token_stream(&r.expr));
                return Err(syn::Error::new_spanned(
                    &expr,
                    format!("`needs` takes the name itself: `needs {name};`"),
                ));
            }
            _ => {
                let text = crate::ast::compact(&quote::ToTokens::to_token_stream(&expr));
                return Err(syn::Error::new_spanned(
                    &expr,
                    format!(
                        "`needs` rebinds a local name to its marked value, and `{text}` is \
                         not one; mark it where it is read with `::remat::needs(&{text})`, \
                         or bind it to a local first"
                    ),
                ));
            }
        }
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
    Ok(NeedsStmt {
        attrs,
        needs,
        names,
    })
}
