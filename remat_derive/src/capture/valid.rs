//! What `#[derive(Capture)]` refuses: a union, whose active field no
//! generated code can know, so only its author can capture it.

use syn::{Data, DeriveInput};

/// `Ok`, or the error for a union.
pub(crate) fn check(input: &DeriveInput) -> syn::Result<()> {
    match &input.data {
        Data::Union(data) => Err(syn::Error::new(
            data.union_token.span,
            "`Capture` cannot be derived for a union; implement it by hand",
        )),
        Data::Struct(_) | Data::Enum(_) => Ok(()),
    }
}
