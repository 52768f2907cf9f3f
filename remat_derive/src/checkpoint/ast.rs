//! The model of a `#[checkpoint]` function: its options, its attributes
//! sorted by where they go, each parameter classified by how it reaches
//! the closure, and its body. `valid` checks it and `expand` reads it;
//! nothing here decides what is refused or generates code, so the checks
//! and the expansion see one reading of the input.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::parse::Parse;
use syn::{AttrStyle, Attribute, Block, FnArg, ItemFn, Pat, Signature, Type, Visibility};

use crate::checkpoint::args::Args;
use crate::checkpoint::param_kind::{classify, Kind};
use crate::errors::parse_to_end;

/// A function under `#[checkpoint]`.
pub(crate) struct Checkpoint {
    pub args: Args,
    /// The outer attributes, kept on the function.
    pub attrs: Vec<Attribute>,
    /// The inner attributes (`#![..]`), kept first in the body.
    pub inner_attrs: Vec<Attribute>,
    /// `#[remat(..)]` on the function, which is gone (`gone_attr`).
    pub gone_attrs: Vec<Attribute>,
    pub vis: Visibility,
    /// The signature as written.
    pub sig: Signature,
    /// One per parameter of `sig`, in order.
    pub params: Vec<Param>,
    /// The body, its `#[remat(..)]` attributes taken out.
    pub body: Block,
    /// Those attributes, one error each, for `valid` to report.
    pub gone_in_body: Option<syn::Error>,
}

/// A parameter, by how it reaches the closure.
pub(crate) enum Param {
    Receiver(Receiver),
    Typed(Typed),
}

/// `self`, in any of its forms.
pub(crate) struct Receiver {
    /// As written, for errors.
    pub written: syn::Receiver,
    /// `&self`, `&mut self` or `self: &T`: captured from the reference.
    pub by_ref: bool,
    /// `&mut self` or `self: &mut T`.
    pub mut_ref: bool,
    /// `mut self`: the receiver's copy in the closure is `mut`.
    pub owned_mut: bool,
}

/// `PAT: TYPE`.
pub(crate) struct Typed {
    /// The pattern as written, bound inside the closure.
    pub pat: Box<Pat>,
    pub ty: Box<Type>,
    pub kind: Kind,
}

/// The item as a function, or the error that says what `#[checkpoint]`
/// applies to.
pub(crate) fn parse_fn(item: TokenStream) -> syn::Result<ItemFn> {
    parse_to_end(ItemFn::parse, item).map_err(|error| {
        syn::Error::new(
            error.span(),
            format!("`#[checkpoint]` applies to a function or method with a body: {error}"),
        )
    })
}

impl Checkpoint {
    /// The model of `func`, with the options `args`.
    pub(crate) fn new(args: Args, func: ItemFn) -> Checkpoint {
        let mut attrs = Vec::new();
        let mut inner_attrs = Vec::new();
        let mut gone_attrs = Vec::new();
        for attr in func.attrs {
            if attr.path().is_ident("remat") {
                gone_attrs.push(attr);
                continue;
            }
            match attr.style {
                AttrStyle::Outer => attrs.push(attr),
                AttrStyle::Inner(_) => inner_attrs.push(attr),
            }
        }
        let params = func.sig.inputs.iter().map(Param::of).collect();
        let mut gone_in_body = None;
        let tokens = crate::gone_attr::strip(func.block.to_token_stream(), &mut gone_in_body);
        let body = syn::parse2(tokens).unwrap_or_else(|_| (*func.block).clone());
        Checkpoint {
            args,
            attrs,
            inner_attrs,
            gone_attrs,
            vis: func.vis,
            sig: func.sig,
            params,
            body,
            gone_in_body,
        }
    }

    /// Whether the function is a method taking `self`.
    pub(crate) fn has_receiver(&self) -> bool {
        self.params.iter().any(|p| matches!(p, Param::Receiver(_)))
    }
}

impl Param {
    /// The model of one parameter as written.
    fn of(arg: &FnArg) -> Param {
        match arg {
            FnArg::Receiver(recv) => Param::Receiver(Receiver {
                written: recv.clone(),
                by_ref: match (&recv.reference, &*recv.ty) {
                    (Some(_), _) => true,
                    (None, Type::Reference(_)) if recv.colon_token.is_some() => true,
                    _ => false,
                },
                mut_ref: recv.reference.is_some() && recv.mutability.is_some()
                    || matches!(&*recv.ty, Type::Reference(r) if r.mutability.is_some()),
                owned_mut: recv.reference.is_none() && recv.mutability.is_some(),
            }),
            FnArg::Typed(typed) => Param::Typed(Typed {
                pat: typed.pat.clone(),
                ty: typed.ty.clone(),
                kind: classify(&typed.ty),
            }),
        }
    }
}
