//! `#[derive(RegionOutput)]`: a struct or enum of the user's, whose fields
//! are region outputs themselves (tensors, `Option<Tensor>`s, `Vec`s,
//! tuples, other derived types), becomes a region and checkpoint output
//! with a saved form bare code cannot read unmarked (docs/dsl.md, rule
//! Y10). Parse (`ast`), check (`valid`), generate (`expand`, with the
//! flattening in `layout`, the field view in `view`, and the arms all of
//! them match with in `arms`).

mod arms;
mod ast;
mod expand;
mod layout;
mod valid;
mod view;

use proc_macro2::TokenStream;

/// Entry point of `#[derive(RegionOutput)]`.
pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let run = || -> syn::Result<TokenStream> {
        let input = syn::parse2::<syn::DeriveInput>(input)?;
        let output = ast::Output::parse(&input)?;
        valid::check(&output)?;
        Ok(expand::expand(&output))
    };
    run().unwrap_or_else(|e| e.to_compile_error())
}
