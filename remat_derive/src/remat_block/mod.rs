//! `remat!`, whose regions run as regions of the enclosing checkpoint.
//!
//! The passes, in order: refuse input nested too deep (`depth_limit`),
//! take out `#[remat(..)]` (`gone_attr`), rewrite `needs` in nested blocks
//! (`nested_needs`), parse into the model (`parse` into `ast`), check it
//! (`valid`), generate (`expand`). Every error is reported, none stops the
//! expansion: a malformed statement is skipped, the rest still expands, so
//! rustc's own errors stay about the code the user wrote.

pub(crate) mod ast;
mod expand;
mod nested_needs;
pub(crate) mod parse;
mod valid;

use proc_macro2::TokenStream;
use quote::quote;

use crate::errors::push_error;
use crate::remat_block::ast::Invocation;

/// Entry point of `remat!`.
pub(crate) fn remat(input: TokenStream) -> TokenStream {
    if let Some(error) = crate::depth_limit::check(&input) {
        return error.to_compile_error();
    }
    // `#[remat(..)]` is gone (docs/dsl.md, section Y): refused wherever it
    // stands, bare statements included.
    let mut errors = None;
    let input = crate::gone_attr::strip(input, &mut errors);
    // docs/dsl.md, rule Y2: `needs` statements in the blocks inside.
    let input = nested_needs::rewrite(input);
    let (invocation, more) = parse::parse_invocation(input);
    if let Some(more) = more {
        push_error(&mut errors, more);
    }
    let refused = valid::check(&invocation).map(|e| e.to_compile_error());
    let body = expand::expand(&invocation);
    match &invocation {
        // Parse errors first, the refused regions' after the statements.
        Invocation::Stmts(_) => {
            let errors = errors.map(|e| e.to_compile_error());
            quote!(#errors #body #refused)
        }
        // A single region parsed whole, so `errors` holds at most
        // `#[remat(..)]` refusals, which this form has never emitted (the
        // attribute is dropped silently): left so, as the output was.
        Invocation::Expr(_) => match refused {
            Some(refused) => quote!({ #refused #body }),
            None => body,
        },
    }
}
