//! Match arms over a derived type's shape: every trait the derive writes
//! destructures the value the same way (a struct as one arm, an enum as an
//! arm per variant), binding each field to a name, so the arms are built
//! here once and each impl says only what it does with the fields.

use proc_macro2::TokenStream;
use quote::quote;

use crate::output::ast::{Fields, Output, Shape};

/// One match arm per variant (a struct is one arm with no variant name),
/// built by `arm` from the variant's path on both sides and its fields.
pub(crate) fn arms(
    output: &Output,
    mut arm: impl FnMut(&TokenStream, &TokenStream, &Fields, usize) -> TokenStream,
) -> TokenStream {
    let (ident, view) = (&output.ident, &output.saved);
    match &output.shape {
        Shape::Struct(fields) => arm(&quote!(#ident), &quote!(#view), fields, 0),
        Shape::Enum(variants) => {
            let arms = variants.iter().enumerate().map(|(i, v)| {
                let name = &v.ident;
                arm(&quote!(#ident::#name), &quote!(#view::#name), &v.fields, i)
            });
            quote!(#(#arms)*)
        }
        Shape::Union(_) => TokenStream::new(),
    }
}

/// The names the fields are bound to, as tokens for `Fields::with`.
pub(crate) fn bound(fields: &Fields) -> Vec<TokenStream> {
    fields.bindings().iter().map(|b| quote!(#b)).collect()
}
