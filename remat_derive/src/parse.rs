//! Parsing `remat!` into the model of `ast`.
//!
//! `save`, `recompute`, `needs` and `scope` are not Rust keywords, so every
//! statement is first classified by looking ahead (a statement that starts
//! with `save` followed by `(` is an ordinary call of a function named `save`),
//! then parsed either as one of ours or as an ordinary `syn::Stmt`. A
//! malformed statement is reported and skipped, so that one error does not
//! hide the others.

use std::cell::Cell;

use proc_macro2::{Delimiter, Spacing, TokenStream};
use syn::buffer::Cursor;
use syn::ext::IdentExt;
use syn::parse::discouraged::Speculative;
use syn::parse::ParseStream;
use syn::{token, Attribute, Expr, Ident, Lit, LitStr, Pat, Token};

use crate::ast::{
    compact, Call, Invocation, MissingCall, Name, NeedsStmt, Policy, PolicyKind, Region,
    RegionStmt, ScopeStmt, Stmt,
};
use crate::default_name;
use crate::errors::{parse_to_end, push_error};
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

enum Kind {
    Region,
    LetRegion,
    /// `let PAT = save;`
    MissingCall,
    Needs,
    Scope,
    Bare,
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

fn classify(input: ParseStream) -> Kind {
    let cursor = input.cursor();
    if policy_at(cursor).is_some() {
        return Kind::Region;
    }
    if input.peek(Token![let]) {
        let fork = input.fork();
        if parse_let_head(&fork).is_ok() {
            if policy_at(fork.cursor()).is_some() {
                return Kind::LetRegion;
            }
            if let Some((ident, rest)) = fork.cursor().ident() {
                if (ident == "save" || ident == "recompute" || ident == "auto")
                    && punct_is(rest, ';')
                {
                    return Kind::MissingCall;
                }
            }
        }
        return Kind::Bare;
    }
    if let Some((ident, rest)) = cursor.ident() {
        if ident == "needs" && (operand_ident(rest) || punct_is(rest, '&') || punct_is(rest, ';')) {
            return Kind::Needs;
        }
        if ident == "scope" {
            if operand_ident(rest)
                || rest.literal().is_some()
                || rest.group(Delimiter::Brace).is_some()
            {
                return Kind::Scope;
            }
            // `scope[i] = x;` is an ordinary assignment; a scope needs braces.
            if let Some((_, _, after)) = rest.group(Delimiter::Bracket) {
                if after.group(Delimiter::Brace).is_some() {
                    return Kind::Scope;
                }
            }
        }
    }
    Kind::Bare
}

/// `save`/`recompute`/`auto` at the cursor, used as a policy: followed by something
/// that starts a region (`save attention: ...`, `save "x": ...`,
/// `save [e]: ...`, `save self.f(x)`), not by an operator as a variable
/// named `save` would be.
fn policy_at(cursor: Cursor) -> Option<Policy> {
    let (ident, rest) = cursor.ident()?;
    let kind = if ident == "save" {
        PolicyKind::Save
    } else if ident == "recompute" {
        PolicyKind::Recompute
    } else if ident == "auto" {
        PolicyKind::Auto
    } else if ident == "region" {
        // `region [EXPR] ...`: the policy group, then the rest of a region.
        let (_, _, after) = rest.group(Delimiter::Bracket)?;
        return starts_region(after).then_some(Policy {
            kind: PolicyKind::Dynamic,
            span: ident.span(),
        });
    } else {
        return None;
    };
    starts_region(rest).then_some(Policy {
        kind,
        span: ident.span(),
    })
}

/// What follows a policy: a name and `:`, or a call.
fn starts_region(rest: Cursor) -> bool {
    operand_ident(rest)
        || rest.literal().is_some()
        || rest
            .group(Delimiter::Bracket)
            .is_some_and(|(_, _, after)| single_colon(after) || operand_ident(after))
}

/// An identifier that can start an operand (not `as`, `else`, `in`, which
/// may follow a variable).
fn operand_ident(cursor: Cursor) -> bool {
    cursor
        .ident()
        .is_some_and(|(i, _)| i != "as" && i != "else" && i != "in")
}

fn punct_is(cursor: Cursor, ch: char) -> bool {
    cursor.punct().is_some_and(|(p, _)| p.as_char() == ch)
}

/// A `:` that is not the start of `::`.
fn single_colon(cursor: Cursor) -> bool {
    cursor
        .punct()
        .is_some_and(|(p, _)| p.as_char() == ':' && p.spacing() == Spacing::Alone)
}

/// `let PAT [: TYPE] =`
fn parse_let_head(input: ParseStream) -> syn::Result<Pat> {
    input.parse::<Token![let]>()?;
    let mut pat = Pat::parse_multi_with_leading_vert(input)?;
    if input.peek(Token![:]) && !input.peek(Token![::]) {
        let colon_token = input.parse()?;
        let ty = input.parse()?;
        pat = Pat::Type(syn::PatType {
            attrs: Vec::new(),
            pat: Box::new(pat),
            colon_token,
            ty,
        });
    }
    input.parse::<Token![=]>()?;
    Ok(pat)
}

pub(crate) const REGION_FORM: &str = "`save NAME: CALL` or `recompute NAME: CALL`, \
    e.g. `let attn = save attention: self.attention.forward(&h);`";

/// The error for a policy keyword without its call (`save;`, `let a = save;`).
pub(crate) fn missing_call(keyword: &str) -> String {
    format!("expected a call after `{keyword}`: {REGION_FORM}")
}

/// `POLICY [NAME ':'] CALL`
fn parse_region(input: ParseStream) -> syn::Result<Region> {
    let policy = policy_at(input.cursor())
        .ok_or_else(|| input.error(format!("expected a region: {REGION_FORM}")))?;
    input.call(Ident::parse_any)?;
    let policy_expr = if policy.kind == PolicyKind::Dynamic {
        let content;
        syn::bracketed!(content in input);
        let expr: Expr = content.parse()?;
        if !content.is_empty() {
            return Err(content.error(
                "expected one expression giving the policy inside `[...]`: `region [EXPR] NAME: CALL`",
            ));
        }
        Some(Box::new(expr))
    } else {
        None
    };
    let explicit = parse_name(input, "region")?;
    if explicit.is_some() {
        if !input.peek(Token![:]) || input.peek(Token![::]) {
            return Err(input.error(format!("expected `:` after the region name: {REGION_FORM}")));
        }
        input.parse::<Token![:]>()?;
    }
    let keyword = policy.keyword();
    if input.is_empty() || input.peek(Token![;]) {
        return Err(input.error(missing_call(keyword)));
    }
    let expr: Expr = input.parse().map_err(|error| {
        syn::Error::new(
            error.span(),
            format!("{error}; a `{keyword}` region runs one call: {REGION_FORM}"),
        )
    })?;
    let call = match expr {
        Expr::Call(call) => Call::Fn(call),
        Expr::MethodCall(call) => Call::Method(call),
        Expr::Path(path)
            if explicit.is_none()
                && path.path.get_ident().is_some()
                && !input.is_empty()
                && !input.peek(Token![;]) =>
        {
            return Err(syn::Error::new_spanned(
                path,
                format!("expected `:` after the region name: {REGION_FORM}"),
            ))
        }
        other => {
            return Err(syn::Error::new_spanned(
                other,
                format!(
                    "a `{keyword}` region runs one call or method call, and this is \
                     not one: {REGION_FORM}"
                ),
            ))
        }
    };
    let name = match explicit {
        Some(name) => name,
        None => default_name::default_name(&call).ok_or_else(|| {
            let call = match &call {
                Call::Fn(c) => quote::ToTokens::to_token_stream(c),
                Call::Method(c) => quote::ToTokens::to_token_stream(c),
            };
            syn::Error::new_spanned(
                &call,
                format!(
                    "cannot name this region after its callee; name it: \
                     `{keyword} NAME: {}`",
                    compact(&call)
                ),
            )
        })?,
    };
    Ok(Region {
        policy,
        policy_expr,
        name,
        call,
    })
}

/// An optional `NAME`: an identifier followed by `:`, a string literal, or
/// `[expr]`. `what` is "region" or "scope", for messages.
fn parse_name(input: ParseStream, what: &str) -> syn::Result<Option<Name>> {
    let cursor = input.cursor();
    if input.peek(token::Bracket) {
        let content;
        let bracket = syn::bracketed!(content in input);
        if content.is_empty() {
            return Err(syn::Error::new(
                bracket.span.join(),
                format!("expected an expression giving the {what} name inside `[...]`"),
            ));
        }
        let expr: Expr = content.parse()?;
        if !content.is_empty() {
            return Err(content.error(format!(
                "expected one expression giving the {what} name inside `[...]`"
            )));
        }
        return Ok(Some(Name::Dynamic(Box::new(expr))));
    }
    if cursor.literal().is_some() {
        let lit: Lit = input.parse()?;
        let Lit::Str(lit) = lit else {
            return Err(syn::Error::new(
                lit.span(),
                format!("a {what} name is an identifier, a string literal or `[expr]`"),
            ));
        };
        return static_name(&lit, what).map(Some);
    }
    if let Some((ident, rest)) = cursor.ident() {
        // A region name is followed by `:`; a scope name by its braces.
        let is_name = match what {
            "region" => single_colon(rest),
            _ => true,
        };
        if is_name {
            input.call(Ident::parse_any)?;
            return Ok(Some(Name::Static {
                value: ident.unraw().to_string(),
                span: ident.span(),
            }));
        }
    }
    Ok(None)
}

fn static_name(lit: &LitStr, what: &str) -> syn::Result<Name> {
    let value = lit.value();
    if value.is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            format!("a {what} name must not be empty"),
        ));
    }
    Ok(Name::Static {
        value,
        span: lit.span(),
    })
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
