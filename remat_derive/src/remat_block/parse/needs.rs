//! Parsing the `needs` statement, `needs NAME (, NAME)* ;`.
//!
//! docs/dsl.md, rule Y2: the statement rebinds each name to its marked
//! value, so it takes local names only; anything else (a field, `&x`) is
//! refused with the expression form that marks it where it is read.

use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::{Attribute, Expr, Ident, Token};

use crate::remat_block::ast::NeedsStmt;
use crate::remat_block::parse::compact::compact;

/// The statement's form, for messages.
const FORM: &str = "`needs x;` or `needs x, y;`";

/// `needs NAME (, NAME)* ;`, with the statement's outer attributes.
pub(crate) fn parse_needs(input: ParseStream, attrs: Vec<Attribute>) -> syn::Result<NeedsStmt> {
    let needs = input.call(Ident::parse_any)?;
    let mut names = Vec::new();
    loop {
        let expr: Expr = input
            .parse()
            .map_err(|error| syn::Error::new(error.span(), format!("{error}; expected {FORM}")))?;
        names.push(local_name(&expr)?);
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

/// The local name `expr` is, or the error that says what to write instead.
fn local_name(expr: &Expr) -> syn::Result<Ident> {
    if let Some(name) = ident_of(expr) {
        return Ok(name);
    }
    if let Expr::Reference(r) = expr {
        if ident_of(&r.expr).is_some() {
            let name = compact(&quote::ToTokens::to_token_stream(&r.expr));
            return Err(syn::Error::new_spanned(
                expr,
                format!("`needs` takes the name itself: `needs {name};`"),
            ));
        }
    }
    let text = compact(&quote::ToTokens::to_token_stream(expr));
    Err(syn::Error::new_spanned(
        expr,
        format!(
            "`needs` rebinds a local name to its marked value, and `{text}` is \
             not one; mark it where it is read with `::remat::needs(&{text})`, \
             or bind it to a local first"
        ),
    ))
}

/// The identifier of a one-segment path (`x`), if `expr` is one.
fn ident_of(expr: &Expr) -> Option<Ident> {
    match expr {
        Expr::Path(path) if path.qself.is_none() => path.path.get_ident().cloned(),
        _ => None,
    }
}
