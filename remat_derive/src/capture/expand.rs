//! What `#[derive(Capture)]` writes: `Capture::capture` building the value
//! again from each field's capture (a shallow clone for a tensor, a clone
//! for plain data, a new handle for an `Arc`). Type parameters get a
//! `Capture` bound. Each field's call carries the field type's span, so a
//! field that cannot be captured is reported at that field.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DataEnum, DataStruct, DeriveInput, Fields};

/// The `Capture` impl for a struct or enum (`valid` refused unions).
pub(crate) fn expand(input: &DeriveInput) -> TokenStream {
    let body = match &input.data {
        Data::Struct(data) => struct_body(data),
        Data::Enum(data) => enum_body(data),
        Data::Union(_) => TokenStream::new(),
    };
    let name = &input.ident;
    let mut generics = input.generics.clone();
    for param in generics.type_params_mut() {
        param.bounds.push(syn::parse_quote!(::remat::Capture));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics ::remat::Capture for #name #ty_generics #where_clause {
            fn capture(&self) -> Self {
                #body
            }
        }
    }
}

/// `Self { a: capture(&self.a), .. }`.
fn struct_body(data: &DataStruct) -> TokenStream {
    let fields = data.fields.iter().enumerate().map(|(i, field)| {
        let member = match &field.ident {
            Some(ident) => quote!(#ident),
            None => {
                let index = syn::Index::from(i);
                quote!(#index)
            }
        };
        capture(field, quote!(&self.#member))
    });
    construct(quote!(Self), &data.fields, fields)
}

/// A `match` with one arm per variant, each capturing the variant's fields.
fn enum_body(data: &DataEnum) -> TokenStream {
    let arms = data.variants.iter().map(|variant| {
        let name = &variant.ident;
        let bindings: Vec<_> = (0..variant.fields.len())
            .map(|i| format_ident!("__remat_f{}", i))
            .collect();
        let pattern = match &variant.fields {
            Fields::Named(fields) => {
                let names = fields.named.iter().map(|f| &f.ident);
                quote!(Self::#name { #(#names: #bindings),* })
            }
            Fields::Unnamed(_) => quote!(Self::#name(#(#bindings),*)),
            Fields::Unit => quote!(Self::#name),
        };
        let captured = variant
            .fields
            .iter()
            .zip(&bindings)
            .map(|(field, binding)| capture(field, quote!(#binding)));
        let value = construct(quote!(Self::#name), &variant.fields, captured);
        quote!(#pattern => #value,)
    });
    if data.variants.is_empty() {
        quote!(match *self {})
    } else {
        quote!(match self { #(#arms)* })
    }
}

/// One field's capture, at the field type's span.
fn capture(field: &syn::Field, value: TokenStream) -> TokenStream {
    quote_spanned!(field.ty.span()=> ::remat::Capture::capture(#value))
}

/// `PATH { a: .., b: .. }`, `PATH(.., ..)` or `PATH`.
fn construct(
    path: TokenStream,
    fields: &Fields,
    values: impl Iterator<Item = TokenStream>,
) -> TokenStream {
    match fields {
        Fields::Named(named) => {
            let names = named.named.iter().map(|f| &f.ident);
            quote!(#path { #(#names: #values),* })
        }
        Fields::Unnamed(_) => quote!(#path(#(#values),*)),
        Fields::Unit => path,
    }
}
