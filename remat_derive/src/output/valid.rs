//! What `#[derive(RegionOutput)]` refuses before generating anything: a
//! union (no field is known to hold the value), and a generic type (its
//! saved form's fields are written from the fields' types). Field types are
//! rustc's to check: one that is no output is reported at the field, with
//! `OutputItem`'s message.

use crate::errors::push_error;
use crate::output::ast::{Output, Shape};
use syn::spanned::Spanned;

/// Every problem at once, or `Ok`.
pub(crate) fn check(output: &Output) -> syn::Result<()> {
    let mut errors = None;
    if let Shape::Union(span) = output.shape {
        push_error(
            &mut errors,
            syn::Error::new(
                span,
                "`RegionOutput` cannot be derived for a union: write a struct or an enum whose \
                 fields are tensors, `Option<Tensor>`s, `Vec`s, tuples or other such types",
            ),
        );
    }
    if !output.generics.params.is_empty() {
        push_error(
            &mut errors,
            syn::Error::new(
                output.generics.params.span(),
                "`RegionOutput` cannot be derived for a generic type: its saved form is written \
                 from its fields' types; name the types (a type alias per use works)",
            ),
        );
    }
    match errors {
        Some(errors) => Err(errors),
        None => Ok(()),
    }
}
