//! The field view `#[derive(RegionOutput)]` writes: a type (`Saved` and the
//! type's name, or `#[remat(saved = Name)]`) whose fields are references to
//! the fields of a `remat::Saved<T>`, each wrapped in `remat::Saved` too,
//! so that `saved.fields().out.size()` reads metadata and nothing more
//! (docs/dsl.md, rule Y10).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use crate::output::ast::{Fields, Output, Shape, Style};

/// Whether the type has a field at all (its view then borrows).
pub(crate) fn has_fields(output: &Output) -> bool {
    match &output.shape {
        Shape::Struct(fields) => !fields.fields.is_empty(),
        Shape::Enum(variants) => variants.iter().any(|v| !v.fields.fields.is_empty()),
        Shape::Union(_) => false,
    }
}

/// The field view's definition: each field a `&'a remat::Saved<..>`.
pub(crate) fn view_type(output: &Output) -> TokenStream {
    let (vis, ident, view) = (&output.vis, &output.ident, &output.saved);
    let lifetime = has_fields(output).then(|| quote!(<'a>));
    let doc = format!(
        "The fields of a `remat::Saved<{ident}>` (a save output bare code has not marked), \
         each a `&remat::Saved<..>`: their metadata and views, not their data \
         (`saved.fields()`). Written by `#[derive(RegionOutput)]`."
    );
    match &output.shape {
        Shape::Struct(fields) => {
            let body = field_list(fields);
            let semi = match fields.style {
                Style::Named => TokenStream::new(),
                _ => quote!(;),
            };
            quote! {
                #[doc = #doc]
                #[allow(missing_docs, dead_code)]
                #vis struct #view #lifetime #body #semi
            }
        }
        Shape::Enum(variants) => {
            let variants = variants.iter().map(|v| {
                let (name, body) = (&v.ident, field_list(&v.fields));
                quote!(#name #body)
            });
            quote! {
                #[doc = #doc]
                #[allow(missing_docs, dead_code)]
                #vis enum #view #lifetime { #(#variants),* }
            }
        }
        Shape::Union(_) => TokenStream::new(),
    }
}

/// The view's fields for `fields`: `{ a: &'a Saved<A>, .. }`, `(..)` or
/// nothing, each at its type's span.
fn field_list(fields: &Fields) -> TokenStream {
    let defs = fields.fields.iter().map(|f| {
        let (vis, ty) = (&f.vis, &f.ty);
        let wrapped = quote_spanned!(ty.span()=> &'a ::remat::Saved<#ty>);
        match &f.ident {
            Some(name) => quote!(#vis #name: #wrapped),
            None => quote!(#vis #wrapped),
        }
    });
    match fields.style {
        Style::Named => quote!({ #(#defs),* }),
        Style::Unnamed => quote!(( #(#defs),* )),
        Style::Unit => TokenStream::new(),
    }
}
