//! What `#[derive(RegionOutput)]` writes for a type `T`:
//!
//! - `OutputItem` (`layout`) and `RegionOutput`, with `remat::Saved<T>` as
//!   the form bare code holds when a region that may be skipped returned
//!   it: `needs`, region arguments and checkpoint returns open it as they
//!   open a `Saved<Tensor>` (the runtime's own impls, for any `T` that is a
//!   `RegionInput`);
//! - `RegionInput` (a region may take it, and `needs` asks for every tensor
//!   in it) and `CheckpointOutputItem` (a checkpoint may return it);
//! - `SavedFields`, with the field view (`view`).
//!
//! Nothing written here reads a `Saved<T>`'s value: the field view wraps
//! the references it takes (docs/dsl.md, rule Y10).

use proc_macro2::{Ident, TokenStream};
use quote::quote;

use crate::output::arms::{arms, bound};
use crate::output::ast::Output;
use crate::output::layout::output_item;
use crate::output::view::{has_fields, view_type};

/// Everything the derive writes.
pub(crate) fn expand(output: &Output) -> TokenStream {
    let ident = &output.ident;
    let view_type = view_type(output);
    let output_item = output_item(output);
    let region_output = region_output(ident);
    let region_input = region_input(output);
    let checkpoint_output_item = checkpoint_output_item(ident);
    let saved_fields = saved_fields(output);
    quote! {
        #view_type

        #[automatically_derived]
        impl ::remat::__private::OutputSeal for #ident {}

        #output_item
        #region_output
        #region_input
        #checkpoint_output_item
        #saved_fields
    }
}

/// `RegionOutput`, through `OutputItem`'s flattening.
fn region_output(ident: &Ident) -> TokenStream {
    quote! {
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
    }
}

/// `RegionInput`: every field's tensors visited.
fn region_input(output: &Output) -> TokenStream {
    let ident = &output.ident;
    let visit = arms(output, |plain, _, fields, _| {
        let pattern = fields.with(&bound(fields));
        let each = fields
            .bindings()
            .into_iter()
            .map(|b| quote!(::remat::io::RegionInput::visit(#b, f);));
        quote!(#plain #pattern => { #(#each)* })
    });
    quote! {
        #[automatically_derived]
        impl ::remat::io::RegionInput for #ident {
            #[allow(unused_variables)]
            fn visit(&self, f: &mut dyn FnMut(&::remat::Tensor)) {
                match self { #visit }
            }
        }
    }
}

/// `CheckpointOutputItem`: the value leaves a checkpoint as it is.
fn checkpoint_output_item(ident: &Ident) -> TokenStream {
    quote! {
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
    }
}

/// `SavedFields`: the field view of a value, each field wrapped.
fn saved_fields(output: &Output) -> TokenStream {
    let (ident, view) = (&output.ident, &output.saved);
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
    let lifetime = has_fields(output).then(|| quote!(<'a>));
    quote! {
        #[automatically_derived]
        impl ::remat::io::SavedFields for #ident {
            type Fields<'a> = #view #lifetime where Self: 'a;
            fn fields(&self) -> Self::Fields<'_> {
                match self { #wrap }
            }
        }
    }
}
