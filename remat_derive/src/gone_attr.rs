//! `#[remat(unchecked)]`, the escape hatch of the source check that rustc's
//! types replaced (docs/dsl.md, section Y): it has nothing left to silence,
//! so it is refused with the way to migrate, rather than left for rustc to
//! report as an unknown attribute.

use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};
use syn::Attribute;

use crate::errors::push_error;

/// What to do instead, for every `#[remat(..)]`.
const GONE: &str = "`#[remat(..)]` no longer exists: rustc's types decide what bare code may \
                    read (docs/dsl.md, section Y); remove the attribute, then mark the save \
                    output with `needs` before reading it, or read it on the forward only \
                    with `.on_forward()`";

/// The error for `attr`, a `#[remat(..)]` attribute.
pub(crate) fn error(attr: &Attribute) -> syn::Error {
    syn::Error::new_spanned(attr, GONE)
}

/// `tokens` without their `#[remat ..]` and `#![remat ..]` attributes, each
/// reported in `errors`.
pub(crate) fn strip(tokens: TokenStream, errors: &mut Option<syn::Error>) -> TokenStream {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let bang = matches!(&tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!');
        let group_at = i + 1 + usize::from(bang);
        if let (TokenTree::Punct(hash), Some(TokenTree::Group(group))) =
            (&tokens[i], tokens.get(group_at))
        {
            let first = group.stream().into_iter().next();
            if hash.as_char() == '#'
                && group.delimiter() == Delimiter::Bracket
                && matches!(&first, Some(TokenTree::Ident(id)) if id == "remat")
            {
                let attr: TokenStream = tokens[i..=group_at].iter().cloned().collect();
                push_error(errors, syn::Error::new_spanned(attr, GONE));
                i = group_at + 1;
                continue;
            }
        }
        match &tokens[i] {
            TokenTree::Group(group) => {
                let mut inner = Group::new(group.delimiter(), strip(group.stream(), errors));
                inner.set_span(group.span());
                out.push(TokenTree::Group(inner));
            }
            other => out.push(other.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}
