//! Classifying a `remat!` statement before parsing it. `save`,
//! `recompute`, `auto`, `region`, `needs` and `scope` are not Rust keywords,
//! so whether a statement is one of ours depends on what follows the word:
//! `save attention: f(x)` is a region, `save(x)` a call of a function named
//! `save`, `save + 1` an expression on a variable. It runs on a fork: the
//! statement is then parsed from its start, as what it was classified.

use proc_macro2::{Delimiter, Spacing};
use syn::buffer::Cursor;
use syn::parse::ParseStream;
use syn::{Pat, Token};

use crate::remat_block::ast::{Policy, PolicyKind};

/// What a statement is, by its first tokens.
pub(crate) enum Kind {
    /// `POLICY REGION;`
    Region,
    /// `let PAT = POLICY REGION;`
    LetRegion,
    Needs,
    Scope,
    /// Ordinary Rust.
    Bare,
}

/// What the statement at `input` is, judged from its first tokens.
pub(crate) fn classify(input: ParseStream) -> Kind {
    let cursor = input.cursor();
    if policy_at(cursor).is_some() {
        return Kind::Region;
    }
    if input.peek(Token![let]) {
        let fork = input.fork();
        if parse_let_head(&fork).is_ok() && policy_at(fork.cursor()).is_some() {
            return Kind::LetRegion;
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
pub(crate) fn policy_at(cursor: Cursor) -> Option<Policy> {
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

/// Whether the cursor is at the punctuation character `ch`.
fn punct_is(cursor: Cursor, ch: char) -> bool {
    cursor.punct().is_some_and(|(p, _)| p.as_char() == ch)
}

/// A `:` that is not the start of `::`.
pub(crate) fn single_colon(cursor: Cursor) -> bool {
    cursor
        .punct()
        .is_some_and(|(p, _)| p.as_char() == ':' && p.spacing() == Spacing::Alone)
}

/// `let PAT [: TYPE] =`
pub(crate) fn parse_let_head(input: ParseStream) -> syn::Result<Pat> {
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
