//! Unit tests of the macros, through their token-level entry points.

mod expand;
mod fuzz;
mod parse;

use proc_macro2::{TokenStream, TokenTree};

/// The messages of the `compile_error!`s in an expansion, in order.
pub(crate) fn errors(tokens: &TokenStream) -> Vec<String> {
    let mut out = Vec::new();
    collect_errors(tokens.clone(), &mut out);
    out
}

fn collect_errors(tokens: TokenStream, out: &mut Vec<String>) {
    each_error(tokens, &mut |_, group| {
        if let Ok(lit) = syn::parse2::<syn::LitStr>(group.stream()) {
            out.push(lit.value());
        }
    });
}

/// Calls `f` on each `compile_error!` of an expansion (its identifier and
/// the group holding the message), in order, at any depth. A
/// `macro_rules!` definition's errors are not this expansion's: they fire
/// only where it is invoked (a user's macro, copied from the input).
pub(crate) fn each_error(
    tokens: TokenStream,
    f: &mut dyn FnMut(&proc_macro2::Ident, &proc_macro2::Group),
) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut skip = 0;
    for (i, token) in tokens.iter().enumerate() {
        if matches!(token, TokenTree::Ident(ident) if ident == "macro_rules") {
            skip = i + 4; // `macro_rules ! NAME { .. }`
        }
        if i < skip {
            continue;
        }
        match token {
            TokenTree::Ident(ident) if ident == "compile_error" => {
                if let Some(TokenTree::Group(group)) = tokens.get(i + 2) {
                    f(ident, group);
                }
            }
            TokenTree::Group(group) => each_error(group.stream(), f),
            _ => {}
        }
    }
}

/// Runs `remat!` on `input` and returns its error messages.
pub(crate) fn remat_errors(input: TokenStream) -> Vec<String> {
    errors(&crate::remat_block::remat(input))
}

/// Runs `#[checkpoint(args)]` on `item` and returns its error messages.
pub(crate) fn checkpoint_errors(args: TokenStream, item: TokenStream) -> Vec<String> {
    errors(&crate::checkpoint::checkpoint(args, item))
}

/// Pretty-prints generated items (a file).
pub(crate) fn pretty_items(tokens: TokenStream) -> String {
    match syn::parse2::<syn::File>(tokens.clone()) {
        Ok(file) => prettyplease::unparse(&file),
        Err(error) => panic!("expansion does not parse as items: {error}\n{tokens}"),
    }
}

/// Pretty-prints generated statements, inside a function.
pub(crate) fn pretty_stmts(tokens: TokenStream) -> String {
    pretty_items(quote::quote!(fn __expansion() { #tokens }))
}

/// Asserts that exactly one error was found, containing each of `parts`.
#[track_caller]
pub(crate) fn assert_one_error(errors: &[String], parts: &[&str]) {
    assert_eq!(errors.len(), 1, "expected one error, got {errors:#?}");
    for part in parts {
        assert!(
            errors[0].contains(part),
            "error {:?} does not contain {part:?}",
            errors[0]
        );
    }
}
