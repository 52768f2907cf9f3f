//! `OutputItem` for a derived type: the value flattened field by field
//! into the tensors a region keeps (an enum's variant index first in the
//! layout), and rebuilt from them in the same order when the region is
//! skipped or replayed. `remat::Saved<T>` is the form bare code holds.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use crate::output::arms::{arms, bound};
use crate::output::ast::{Fields, Output, Shape};

/// The `OutputItem` impl.
pub(crate) fn output_item(output: &Output) -> TokenStream {
    let ident = &output.ident;
    let flatten = flatten(output);
    let rebuild = rebuild(output);
    quote! {
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
    }
}

/// `flatten_into`'s arms: the variant's index, then each field's parts.
fn flatten(output: &Output) -> TokenStream {
    let is_enum = matches!(output.shape, Shape::Enum(_));
    arms(output, |plain, _, fields, index| {
        let pattern = fields.with(&bound(fields));
        let variant = is_enum.then(|| quote!(layout.push(#index);));
        let each = fields
            .bindings()
            .into_iter()
            .map(|b| quote!(::remat::io::OutputItem::flatten_into(#b, parts, layout);));
        quote!(#plain #pattern => { #variant #(#each)* })
    })
}

/// `rebuild`'s body: the fields rebuilt in order, for an enum after
/// reading which variant the layout holds.
fn rebuild(output: &Output) -> TokenStream {
    let ident = &output.ident;
    match &output.shape {
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
    }
}

/// `Ok(PATH { a: <A as OutputItem>::rebuild(..)?, .. })`, each field at its
/// type's span.
fn rebuild_fields(plain: &TokenStream, fields: &Fields) -> TokenStream {
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
}
