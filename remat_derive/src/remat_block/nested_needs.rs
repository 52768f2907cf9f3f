//! `needs NAME, ..;` where Rust statements stand inside a `remat!` block:
//! in the block of an `if`, a `match` arm, a loop, a closure. Those blocks
//! are plain Rust, which has no `needs` statement, so before the block is
//! parsed each such statement inside a brace group is rewritten into what
//! the top-level statement expands to, `let NAME = ::remat::needs(NAME);`
//! (docs/dsl.md, rule Y2).
//!
//! `needs` followed by a name is no valid Rust anywhere, so no program's
//! meaning changes: only statements that would not parse are rewritten.

use proc_macro2::{Delimiter, Group, Ident, Punct, TokenStream, TokenTree};
use quote::quote_spanned;

/// Rewrites the `needs` statements inside every brace group of `input`, at
/// any depth (the top level is the parser's own).
pub(crate) fn rewrite(input: TokenStream) -> TokenStream {
    input
        .into_iter()
        .map(|tree| match tree {
            TokenTree::Group(g) => TokenTree::Group(regroup(&g, g.delimiter() == Delimiter::Brace)),
            other => other,
        })
        .collect()
}

/// `group` with its contents rewritten: as statements if it is a block
/// (`statements`), else only the blocks inside it.
fn regroup(group: &Group, statements: bool) -> Group {
    let inner = if statements {
        statements_in(group.stream())
    } else {
        rewrite(group.stream())
    };
    let mut out = Group::new(group.delimiter(), inner);
    out.set_span(group.span());
    out
}

/// The statements of one block, `needs` ones rewritten.
fn statements_in(stream: TokenStream) -> TokenStream {
    let trees: Vec<TokenTree> = stream.into_iter().collect();
    let mut out = TokenStream::new();
    let mut i = 0;
    while i < trees.len() {
        if let Some((names, end)) = needs_at(&trees, i) {
            let span = trees[i].span();
            for name in names {
                out.extend(quote_spanned!(span=> let #name = ::remat::needs(#name);));
            }
            i = end;
            continue;
        }
        match &trees[i] {
            TokenTree::Group(g) => out.extend([TokenTree::Group(regroup(
                g,
                g.delimiter() == Delimiter::Brace,
            ))]),
            other => out.extend([other.clone()]),
        }
        i += 1;
    }
    out
}

/// `needs a, b;` starting at `i`: the names and the index after the `;`.
fn needs_at(trees: &[TokenTree], i: usize) -> Option<(Vec<Ident>, usize)> {
    let TokenTree::Ident(keyword) = &trees[i] else {
        return None;
    };
    if keyword != "needs" {
        return None;
    }
    // At a statement's start: the block's first token, or after `;` or `}`.
    if i > 0 {
        match &trees[i - 1] {
            TokenTree::Punct(p) if p.as_char() == ';' => {}
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {}
            _ => return None,
        }
    }
    let mut names = Vec::new();
    let mut j = i + 1;
    loop {
        let TokenTree::Ident(name) = trees.get(j)? else {
            return None;
        };
        names.push(name.clone());
        j += 1;
        match trees.get(j)? {
            TokenTree::Punct(p) if is(p, ',') => j += 1,
            TokenTree::Punct(p) if is(p, ';') => return Some((names, j + 1)),
            _ => return None,
        }
    }
}

/// Whether `p` is the character `c`.
fn is(p: &Punct, c: char) -> bool {
    p.as_char() == c
}
