//! What `#[derive(RegionOutput)]` writes for a type `T`:
//!
//! - `OutputItem` and `RegionOutput`, flattened field by field (an enum's
//!   variant first in the layout), with `remat::Saved<T>` as the form bare
//!   code holds when a region that may be skipped returned it: `needs`,
//!   region arguments and checkpoint returns open it as they open a
//!   `Saved<Tensor>` (the runtime's own impls, for any `T` that is a
//!   `RegionInput`);
//! - `RegionInput` (a region may take it, and `needs` asks for every tensor
//!   in it) and `CheckpointOutputItem` (a checkpoint may return it);
//! - `SavedFields`, with a view type (`Saved` and the type's name, or
//!   `#[remat(saved = Name)]`) of references to each field wrapped, so that
//!   `saved.fields().out.size()` reads metadata and nothing more.
//!
//! Nothing written here reads a `Saved<T>`'s value: the field view wraps
//! the references it takes (docs/dsl.md, rule T10).

use crate::output::ast::{Fields, Output, Shape, Style};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

/// One match arm per variant (a struct is one arm with no variant name),
/// built by `arm` from the variant's path on both sides and its fields.
fn arms(
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

fn bound(fields: &Fields) -> Vec<TokenStream> {
    fields.bindings().iter().map(|b| quote!(#b)).collect()
}

/// Whether the type has a field at all (its view then borrows).
fn has_fields(output: &Output) -> bool {
    match &output.shape {
        Shape::Struct(fields) => !fields.fields.is_empty(),
        Shape::Enum(variants) => variants.iter().any(|v| !v.fields.fields.is_empty()),
        Shape::Union(_) => false,
    }
}

/// The field view's definition: each field a `&'a remat::Saved<..>`.
fn view_type(output: &Output) -> TokenStream {
    let (vis, ident, view) = (&output.vis, &output.ident, &output.saved);
    let lifetime = has_fields(output).then(|| quote!(<'a>));
    let doc = format!(
        "The fields of a `remat::Saved<{ident}>` (a save output bare code has not marked), \
         each a `&remat::Saved<..>`: their metadata and views, not their data \
         (`saved.fields()`). Written by `#[derive(RegionOutput)]`."
    );
    let field_list = |fields: &Fields| {
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
    };
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

/// Everything the derive writes.
pub(crate) fn expand(output: &Output) -> TokenStream {
    let (ident, view) = (&output.ident, &output.saved);
    let is_enum = matches!(output.shape, Shape::Enum(_));
    let flatten = arms(output, |plain, _, fields, index| {
        let pattern = fields.with(&bound(fields));
        let variant = is_enum.then(|| quote!(layout.push(#index);));
        let each = fields
            .bindings()
            .into_iter()
            .map(|b| quote!(::remat::io::OutputItem::flatten_into(#b, parts, layout);));
        quote!(#plain #pattern => { #variant #(#each)* })
    });
    let rebuild_fields = |plain: &TokenStream, fields: &Fields| {
        let values: Vec<TokenStream> = fields
            .fields
            .iter()
            .map(|f| {
                let ty = &f.ty;
                quote_spanned!(ty.span()=> <#ty as ::remat::io::OutputItem>::rebuild(parts, layout)?)
            })
            .collect();
        let values = fields.with(&values);
        quote!(::core::result::Result::Ok(#plain #values))
    };
    let rebuild = match &output.shape {
        Shape::Struct(fields) => rebuild_fields(&quote!(#ident), fields),
        Shape::Enum(_) => {
            let arms = arms(output, |plain, _, fields, index| {
                let value = rebuild_fields(plain, fields);
                quote!(::core::option::Option::Some(#index) => #value,)
            });
            quote! {
                match layout.next() {
                    #arms
                    _ => ::core::result::Result::Err(::remat::__private::missing_part()),
                }
            }
        }
        Shape::Union(_) => TokenStream::new(),
    };
    let visit = arms(output, |plain, _, fields, _| {
        let pattern = fields.with(&bound(fields));
        let each = fields
            .bindings()
            .into_iter()
            .map(|b| quote!(::remat::io::RegionInput::visit(#b, f);));
        quote!(#plain #pattern => { #(#each)* })
    });
    let wrap = arms(output, |plain, wrapped, fields, _| {
        let pattern = fields.with(&bound(fields));
        let values: Vec<TokenStream> = fields
            .bindings()
            .into_iter()
            .map(|b| quote!(::remat::Saved::from_ref(#b)))
            .collect();
        let values = fields.with(&values);
        quote!(#plain #pattern => #wrapped #values,)
    });
    let view_type = view_type(output);
    let lifetime = has_fields(output).then(|| quote!(<'a>));
    quote! {
        #view_type

        #[automatically_derived]
        impl ::remat::__private::OutputSeal for #ident {}

        #[automatically_derived]
        impl ::remat::io::OutputItem for #ident {
            type Saved = ::remat::Saved<#ident>;
            fn into_saved(self) -> ::remat::Saved<#ident> {
                ::remat::Saved::new(self)
            }
            #[allow(unused_variables)]
            fn flatten_into(
                self,
                parts: &mut ::std::vec::Vec<::core::option::Option<::remat::Tensor>>,
                layout: &mut ::std::vec::Vec<usize>,
            ) {
                match self { #flatten }
            }
            #[allow(unused_variables)]
            fn rebuild(
                parts: &mut dyn ::core::iter::Iterator<Item = ::core::option::Option<::remat::Tensor>>,
                layout: &mut dyn ::core::iter::Iterator<Item = usize>,
            ) -> ::remat::Result<Self> {
                #rebuild
            }
        }

        #[automatically_derived]
        impl ::remat::io::RegionOutput for #ident {
            type Saved = ::remat::Saved<#ident>;
            fn into_saved(self) -> ::remat::Saved<#ident> {
                ::remat::Saved::new(self)
            }
            fn into_parts(
                self,
                layout: &mut ::std::vec::Vec<usize>,
            ) -> ::std::vec::Vec<::core::option::Option<::remat::Tensor>> {
                let mut parts = ::std::vec::Vec::new();
                ::remat::io::OutputItem::flatten_into(self, &mut parts, layout);
                parts
            }
            fn from_parts(
                parts: ::std::vec::Vec<::core::option::Option<::remat::Tensor>>,
                layout: &[usize],
            ) -> ::remat::Result<Self> {
                ::remat::__private::item_from_parts(parts, layout)
            }
        }

        #[automatically_derived]
        impl ::remat::io::RegionInput for #ident {
            #[allow(unused_variables)]
            fn visit(&self, f: &mut dyn FnMut(&::remat::Tensor)) {
                match self { #visit }
            }
        }

        #[automatically_derived]
        impl ::remat::io::CheckpointOutputItem for #ident {
            type Item = #ident;
            #[doc(hidden)]
            const HOLDS_SAVED: bool = false;
            fn into_item(self, _: ::remat::io::Token) -> #ident {
                self
            }
            #[doc(hidden)]
            fn visit_item(&self, f: &mut dyn FnMut(&::remat::Tensor), _: ::remat::io::Token) {
                ::remat::io::RegionInput::visit(self, f)
            }
        }

        #[automatically_derived]
        impl ::remat::io::SavedFields for #ident {
            type Fields<'a> = #view #lifetime where Self: 'a;
            fn fields(&self) -> Self::Fields<'_> {
                match self { #wrap }
            }
        }
    }
}
