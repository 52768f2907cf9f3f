//! `#[derive(Capture)]`: capture a struct (or enum) field by field, so
//! that a module made of capturable parts is capturable and can be `self`
//! in a `#[checkpoint]` method.
//!
//! The passes, in order: parse (syn's `DeriveInput` is the whole model),
//! refuse what cannot be derived (`valid`), generate (`expand`).

mod expand;
mod valid;

use proc_macro2::TokenStream;
use syn::DeriveInput;

/// Entry point of `#[derive(Capture)]`.
pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let run = || -> syn::Result<TokenStream> {
        let input = syn::parse2::<DeriveInput>(input)?;
        valid::check(&input)?;
        Ok(expand::expand(&input))
    };
    run().unwrap_or_else(|error| error.to_compile_error())
}
