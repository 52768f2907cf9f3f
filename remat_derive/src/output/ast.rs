//! What `#[derive(RegionOutput)]` reads of a type: its name and visibility,
//! the name of its saved form, and its shape (a struct's fields, or an
//! enum's variants and theirs).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{Attribute, DeriveInput, Ident, Type, Visibility};

/// The type the derive is on.
pub(crate) struct Output {
    pub vis: Visibility,
    pub ident: Ident,
    /// Its saved form's name: `Saved` and the type's name, or
    /// `#[remat(saved = Name)]`'s.
    pub saved: Ident,
    pub shape: Shape,
    /// The type's generics, for the check that there are none.
    pub generics: syn::Generics,
}

/// What the type is made of.
pub(crate) enum Shape {
    Struct(Fields),
    Enum(Vec<Variant>),
    /// A union, refused by `valid` at its keyword.
    Union(Span),
}

/// An enum's variant.
pub(crate) struct Variant {
    pub ident: Ident,
    pub fields: Fields,
}

/// How fields are written, which decides how they are bound and built.
pub(crate) enum Style {
    Named,
    Unnamed,
    Unit,
}

/// A struct's or variant's fields, in order.
pub(crate) struct Fields {
    pub style: Style,
    pub fields: Vec<Field>,
}

/// One field: what the field view repeats of it.
pub(crate) struct Field {
    /// The field's name (`None` in a tuple struct or variant).
    pub ident: Option<Ident>,
    pub vis: Visibility,
    pub ty: Type,
}

impl Fields {
    /// The model of syn's fields.
    fn of(fields: &syn::Fields) -> Fields {
        let style = match fields {
            syn::Fields::Named(_) => Style::Named,
            syn::Fields::Unnamed(_) => Style::Unnamed,
            syn::Fields::Unit => Style::Unit,
        };
        let fields = fields
            .iter()
            .map(|f| Field {
                ident: f.ident.clone(),
                vis: f.vis.clone(),
                ty: f.ty.clone(),
            })
            .collect();
        Fields { style, fields }
    }

    /// The names the fields are bound to in patterns: the field names, or
    /// `__remat_0, __remat_1, ..` for a tuple's.
    pub(crate) fn bindings(&self) -> Vec<Ident> {
        self.fields
            .iter()
            .enumerate()
            .map(|(i, f)| match &f.ident {
                Some(ident) => format_ident!("__remat_{}", ident),
                None => format_ident!("__remat_{}", i),
            })
            .collect()
    }

    /// `{ a: __remat_a, b: __remat_b }`, `(__remat_0, __remat_1)` or
    /// nothing: a pattern or a constructor with `values` in the fields'
    /// places.
    pub(crate) fn with(&self, values: &[TokenStream]) -> TokenStream {
        match self.style {
            Style::Named => {
                let names = self.fields.iter().map(|f| &f.ident);
                quote!({ #(#names: #values),* })
            }
            Style::Unnamed => quote!(( #(#values),* )),
            Style::Unit => TokenStream::new(),
        }
    }
}

/// `#[remat(saved = Name)]`, the one option.
fn saved_name(attrs: &[Attribute], ident: &Ident) -> syn::Result<Ident> {
    let mut saved = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("remat")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("saved") {
                let name: Ident = meta.value()?.parse()?;
                saved = Some(name);
                Ok(())
            } else {
                Err(meta.error(
                    "unknown `#[remat(..)]` option of `#[derive(RegionOutput)]`; the one option \
                     is `saved = Name`, the name of the type's saved form",
                ))
            }
        })?;
    }
    Ok(saved.unwrap_or_else(|| format_ident!("Saved{}", ident)))
}

impl Output {
    /// The model of the derive's input, or the error in its `#[remat(..)]`.
    pub(crate) fn parse(input: &DeriveInput) -> syn::Result<Output> {
        let shape = match &input.data {
            syn::Data::Struct(data) => Shape::Struct(Fields::of(&data.fields)),
            syn::Data::Enum(data) => Shape::Enum(
                data.variants
                    .iter()
                    .map(|v| Variant {
                        ident: v.ident.clone(),
                        fields: Fields::of(&v.fields),
                    })
                    .collect(),
            ),
            syn::Data::Union(data) => Shape::Union(data.union_token.span),
        };
        Ok(Output {
            vis: input.vis.clone(),
            ident: input.ident.clone(),
            saved: saved_name(&input.attrs, &input.ident)?,
            shape,
            generics: input.generics.clone(),
        })
    }
}
