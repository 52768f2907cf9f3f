//! What each parameter becomes in the expansion. Replay runs inside
//! backward, after the call returned, so the closure must own what it uses
//! (`'static`) and may run more than once (`Fn`): tensor parameters are the
//! checkpoint's inputs and arrive owned in the closure, rebound there as the
//! body expects them; everything else, `self` included, is captured through
//! `Capture` before the call and used by reference inside.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{FnArg, Pat, Signature};

use crate::checkpoint::args::Args;
use crate::checkpoint::ast::{Checkpoint, Param, Receiver, Typed};
use crate::checkpoint::nameable::{has_impl_trait, has_lifetime};
use crate::checkpoint::param_kind::Kind;
use crate::closure_self::CLOSURE_SELF;

/// What the parameters add to the expansion.
#[derive(Default)]
pub(crate) struct Parts {
    /// `let`s before the call: the captured values' captures.
    pub captures: TokenStream,
    /// The checkpoint's inputs, as the call passes them.
    pub inputs: Vec<TokenStream>,
    /// The closure's parameters, one per input.
    pub closure_params: Vec<TokenStream>,
    /// `let`s first in the closure: each parameter bound as the body uses
    /// it, under the name or pattern the user wrote.
    pub rebinds: TokenStream,
}

/// The signature the expanded function keeps: each parameter binds a plain
/// name (its pattern, with its `mut`, moves inside the closure, where the
/// value is used), and an owned `self` loses its `mut` the same way.
pub(crate) fn signature(sig: &Signature) -> Signature {
    let mut sig = sig.clone();
    for (i, arg) in sig.inputs.iter_mut().enumerate() {
        match arg {
            FnArg::Receiver(recv) => {
                if recv.reference.is_none() {
                    recv.mutability = None;
                }
            }
            FnArg::Typed(typed) => {
                *typed.pat = Pat::Ident(syn::PatIdent {
                    attrs: Vec::new(),
                    by_ref: None,
                    mutability: None,
                    ident: outer_name(&typed.pat, i),
                    subpat: None,
                });
            }
        }
    }
    sig
}

/// The name the signature binds parameter `i` to: the one written if the
/// pattern is a plain name, else a generated one.
fn outer_name(pat: &Pat, i: usize) -> Ident {
    match pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
        _ => format_ident!("__remat_arg{}", i, span = Span::mixed_site()),
    }
}

impl Parts {
    /// What the parameters of `checkpoint` add, in order.
    pub(crate) fn of(checkpoint: &Checkpoint) -> Parts {
        let mut parts = Parts::default();
        for (i, param) in checkpoint.params.iter().enumerate() {
            match param {
                Param::Receiver(receiver) => parts.receiver(receiver),
                Param::Typed(typed) => parts.typed(i, typed, &checkpoint.args),
            }
        }
        parts
    }

    /// `self`, captured and rebound as `__remat_self` (`closure_self`).
    fn receiver(&mut self, receiver: &Receiver) {
        let span = receiver.written.self_token.span;
        let cap = Ident::new("__remat_cap_self", Span::mixed_site());
        let this = Ident::new(CLOSURE_SELF, span);
        if receiver.by_ref {
            quote_spanned!(span=> let #cap = ::remat::Capture::capture(self);)
                .to_tokens(&mut self.captures);
            quote!(let #this = &#cap;).to_tokens(&mut self.rebinds);
            return;
        }
        // One use of the trait (through a function pointer), so that a
        // type that cannot be captured is one error, not two.
        let mutability = receiver.owned_mut.then(|| quote!(mut));
        let func = Ident::new("__remat_capfn_self", Span::mixed_site());
        quote_spanned!(span=>
            let #func: fn(&Self) -> Self = <Self as ::remat::Capture>::capture;
            let #cap = #func(&self);
        )
        .to_tokens(&mut self.captures);
        quote!(let #mutability #this = #func(&#cap);).to_tokens(&mut self.rebinds);
    }

    /// Parameter `i`, `PAT: TYPE`: an input or a capture, by its kind.
    fn typed(&mut self, i: usize, typed: &Typed, args: &Args) {
        let inner: &Pat = &typed.pat;
        let outer = outer_name(inner, i);
        let (input, rebind) = match typed.kind {
            Kind::Tensor => {
                self.inputs.push(quote!(#outer));
                self.closure_params.push(inner.to_token_stream());
                return;
            }
            Kind::TensorRef => (quote!(#outer), quote!(&#outer)),
            Kind::TensorOption => (quote!(#outer), quote!(#outer.as_ref())),
            Kind::TensorSlice => (quote!(#outer), quote!(#outer.as_slice())),
            Kind::TensorVec => (quote!(#outer.as_slice()), quote!(&#outer)),
            // `_: T` is neither used nor needed in the body.
            Kind::Capture { .. } if matches!(inner, Pat::Wild(_)) => return,
            Kind::Capture { by_ref } => return self.capture(i, typed, &outer, by_ref, args),
            // Refused (`valid`): a refused function is not expanded.
            Kind::MutRef => return,
        };
        self.inputs.push(input);
        self.closure_params.push(outer.to_token_stream());
        quote!(let #inner = #rebind;).to_tokens(&mut self.rebinds);
    }

    /// Parameter `i`, captured before the call and rebound from its
    /// capture inside.
    fn capture(&mut self, i: usize, typed: &Typed, outer: &Ident, by_ref: bool, args: &Args) {
        let (inner, ty) = (&typed.pat, &typed.ty);
        let ty_span = ty.span();
        // A parameter that only the attribute's own expressions use
        // (`enabled = on`) is used outside the closure; its copy inside is
        // not.
        if args.mentions(outer) {
            quote!(#[allow(unused_variables)]).to_tokens(&mut self.rebinds);
        }
        let cap = format_ident!("__remat_cap{}", i, span = Span::mixed_site());
        if by_ref {
            quote_spanned!(ty_span=> let #cap = ::remat::Capture::capture(#outer);)
                .to_tokens(&mut self.captures);
            quote!(let #inner = &#cap;).to_tokens(&mut self.rebinds);
            return;
        }
        let func = format_ident!("__remat_capfn{}", i, span = Span::mixed_site());
        if has_impl_trait(ty) || has_lifetime(ty) {
            // `impl Trait` cannot be named in a type, and a type with a
            // lifetime makes `fn(&T) -> T` fail elision: the function item
            // is instantiated once, at the type inferred from the
            // parameter, so that this is still one use of the trait.
            quote_spanned!(ty_span=>
                let #func = <_ as ::remat::Capture>::capture;
                let #cap = #func(&#outer);
            )
            .to_tokens(&mut self.captures);
        } else {
            // One use of the trait (see `receiver`).
            quote_spanned!(ty_span=>
                let #func: fn(&#ty) -> #ty = <#ty as ::remat::Capture>::capture;
                let #cap = #func(&#outer);
            )
            .to_tokens(&mut self.captures);
        }
        quote!(let #inner = #func(&#cap);).to_tokens(&mut self.rebinds);
    }
}
