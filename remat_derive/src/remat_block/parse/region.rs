//! Parsing a region, `POLICY [NAME ':'] CALL`, and the names of regions and
//! scopes; a region without a name is named after its callee
//! (`default_name`), or refused when no name is clear.

use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::{token, Expr, Ident, Lit, LitStr, Token};

use crate::name::Name;
use crate::remat_block::ast::{Call, Policy, PolicyKind, Region};
use crate::remat_block::parse::compact::compact;
use crate::remat_block::parse::default_name::default_name;
use crate::remat_block::parse::lookahead::{policy_at, single_colon};

/// A region's form, for messages.
pub(crate) const REGION_FORM: &str = "`save NAME: CALL` or `recompute NAME: CALL`, \
    e.g. `let attn = save attention: self.attention.forward(&h);`";

/// The error for a policy keyword without its call (`save;`, `let a = save;`).
pub(crate) fn missing_call(keyword: &str) -> String {
    format!("expected a call after `{keyword}`: {REGION_FORM}")
}

/// `POLICY [NAME ':'] CALL`
pub(crate) fn parse_region(input: ParseStream) -> syn::Result<Region> {
    let policy = policy_at(input.cursor())
        .ok_or_else(|| input.error(format!("expected a region: {REGION_FORM}")))?;
    input.call(Ident::parse_any)?;
    let policy_expr = parse_policy_expr(input, policy)?;
    let explicit = parse_name(input, "region")?;
    if explicit.is_some() {
        if !input.peek(Token![:]) || input.peek(Token![::]) {
            return Err(input.error(format!("expected `:` after the region name: {REGION_FORM}")));
        }
        input.parse::<Token![:]>()?;
    }
    let keyword = policy.keyword();
    let call = parse_call(input, keyword, explicit.is_some())?;
    let name = match explicit {
        Some(name) => name,
        None => callee_name(&call, keyword)?,
    };
    Ok(Region {
        policy,
        policy_expr,
        name,
        call,
    })
}

/// `[EXPR]` after `region`, the policy chosen at run time; nothing after
/// the other keywords.
fn parse_policy_expr(input: ParseStream, policy: Policy) -> syn::Result<Option<Box<Expr>>> {
    if policy.kind != PolicyKind::Dynamic {
        return Ok(None);
    }
    let content;
    syn::bracketed!(content in input);
    let expr: Expr = content.parse()?;
    if !content.is_empty() {
        return Err(content.error(
            "expected one expression giving the policy inside `[...]`: `region [EXPR] NAME: CALL`",
        ));
    }
    Ok(Some(Box::new(expr)))
}

/// The region's one call or method call. `named`: a name was written, so
/// an identifier here is no forgotten `:`.
fn parse_call(input: ParseStream, keyword: &str, named: bool) -> syn::Result<Call> {
    if input.is_empty() || input.peek(Token![;]) {
        return Err(input.error(missing_call(keyword)));
    }
    let expr: Expr = input.parse().map_err(|error| {
        syn::Error::new(
            error.span(),
            format!("{error}; a `{keyword}` region runs one call: {REGION_FORM}"),
        )
    })?;
    match expr {
        Expr::Call(call) => Ok(Call::Fn(call)),
        Expr::MethodCall(call) => Ok(Call::Method(call)),
        Expr::Path(path)
            if !named
                && path.path.get_ident().is_some()
                && !input.is_empty()
                && !input.peek(Token![;]) =>
        {
            Err(syn::Error::new_spanned(
                path,
                format!("expected `:` after the region name: {REGION_FORM}"),
            ))
        }
        other => Err(syn::Error::new_spanned(
            other,
            format!(
                "a `{keyword}` region runs one call or method call, and this is \
                 not one: {REGION_FORM}"
            ),
        )),
    }
}

/// The name of a region that has none written: its callee's, or an error
/// asking for one.
fn callee_name(call: &Call, keyword: &str) -> syn::Result<Name> {
    default_name(call).ok_or_else(|| {
        let call = match call {
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
    })
}

/// An optional `NAME`: an identifier followed by `:`, a string literal, or
/// `[expr]`. `what` is "region" or "scope", for messages.
pub(crate) fn parse_name(input: ParseStream, what: &str) -> syn::Result<Option<Name>> {
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

/// A string literal's name, which must not be empty.
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
