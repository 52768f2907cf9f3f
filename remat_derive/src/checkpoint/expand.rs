//! The function `#[checkpoint]` writes: its body becomes a checkpoint's
//! closure.
//!
//! ```text
//! fn forward(&self, x: &Tensor, n: usize) -> Tensor { BODY }
//! ```
//! becomes
//! ```text
//! fn forward(&self, x: &Tensor, n: usize) -> Tensor {
//!     let __remat_cap_self = ::remat::Capture::capture(self);
//!     let __remat_cap1 = ::remat::Capture::capture(&n);
//!     ::remat::checkpoint("forward").call((x,), move |(x,)| -> Tensor {
//!         let __remat_self = &__remat_cap_self;
//!         let x = &x;
//!         let n = ::remat::Capture::capture(&__remat_cap1);
//!         BODY   // with `self` renamed to `__remat_self`
//!     })
//! }
//! ```
//!
//! The parameters' part is `params`'; the body's return positions are
//! `returned`'s, `self` in it `rename_self`'s. Errors go first inside the
//! body, so that they are emitted whether the function is a free function
//! or a method.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::visit_mut::VisitMut;
use syn::{LitStr, ReturnType};

use crate::checkpoint::args::Args;
use crate::checkpoint::ast::Checkpoint;
use crate::checkpoint::nameable::has_impl_trait;
use crate::checkpoint::params::{signature, Parts};
use crate::checkpoint::rename_self::RenameSelf;
use crate::checkpoint::returned::Returned;

/// The function, with `errors` first in its body. A `refused` one keeps its
/// signature and its body as written (its `#[remat(..)]` taken out): the
/// errors say what to change, and rustc adds none of its own meanwhile.
pub(crate) fn expand(
    checkpoint: &Checkpoint,
    refused: bool,
    errors: Option<TokenStream>,
) -> TokenStream {
    let (sig, body) = if refused {
        let stmts = &checkpoint.body.stmts;
        (checkpoint.sig.clone(), quote!(#(#stmts)*))
    } else {
        (signature(&checkpoint.sig), checkpointed(checkpoint))
    };
    let Checkpoint {
        attrs,
        inner_attrs,
        vis,
        ..
    } = checkpoint;
    quote! {
        #(#attrs)*
        #vis #sig {
            #(#inner_attrs)*
            #errors
            #body
        }
    }
}

/// The body run as a checkpoint: the captures, then the runtime call with
/// the body as its closure; with `enabled = EXPR`, a branch to the body as
/// written.
fn checkpointed(checkpoint: &Checkpoint) -> TokenStream {
    let Parts {
        captures,
        inputs,
        closure_params,
        rebinds,
    } = Parts::of(checkpoint);
    let mut block = checkpoint.body.clone();
    // The body as written, for `enabled = false`: its value leaves through
    // `returned_plain` (docs/dsl.md, rule Y4).
    let plain = checkpoint.args.enabled.is_some().then(|| {
        let mut plain = block.clone();
        Returned::plain().visit_body(&mut plain);
        plain
    });
    Returned::inside().visit_body(&mut block);
    if checkpoint.has_receiver() {
        RenameSelf.visit_block_mut(&mut block);
    }
    let stmts = &block.stmts;
    let name = name(checkpoint);
    let options = options(&checkpoint.args);
    let ret = match &checkpoint.sig.output {
        ReturnType::Type(arrow, ty) if !has_impl_trait(ty) => quote!(#arrow #ty),
        _ => TokenStream::new(),
    };
    let call = quote! {
        #captures
        ::remat::checkpoint(#name) #options
            .call((#(#inputs,)*), move |(#(#closure_params,)*)| #ret {
                #rebinds
                #(#stmts)*
            })
    };
    // `enabled = EXPR`: off runs the body as written (its regions run
    // plainly outside a checkpoint), at the cost of one branch.
    match (&checkpoint.args.enabled, plain) {
        (Some(enabled), Some(plain)) => {
            let plain = &plain.stmts;
            quote! {
                if #enabled {
                    #call
                } else {
                    #(#plain)*
                }
            }
        }
        _ => call,
    }
}

/// The checkpoint's name: the option's, or the function's own.
fn name(checkpoint: &Checkpoint) -> TokenStream {
    match &checkpoint.args.name {
        Some(name) => name.tokens(),
        None => {
            let ident = &checkpoint.sig.ident;
            let value = syn::ext::IdentExt::unraw(ident).to_string();
            LitStr::new(&value, ident.span()).to_token_stream()
        }
    }
}

/// The options as the runtime's builder calls, after `checkpoint(name)`.
fn options(args: &Args) -> TokenStream {
    let determinism = args
        .determinism
        .as_ref()
        .map(|d| quote!(.determinism(::remat::Determinism::#d)));
    let hooks = args.state_hooks.iter().map(|h| quote!(.state_hook(#h)));
    let strict = args.strict.as_ref().map(|s| quote!(.strict_recompute(#s)));
    // docs/semantics.md, rule C18: early stop switched per checkpoint.
    let early_stop = args.early_stop.as_ref().map(|e| quote!(.early_stop(#e)));
    // docs/semantics.md, rule C16: a body that computes gradients itself.
    let backward_inside = args
        .backward_inside
        .as_ref()
        .map(|e| quote!(.backward_inside(#e)));
    // docs/semantics.md, rule C14: the random state kept, or not.
    let preserve_rng_state = args
        .preserve_rng_state
        .as_ref()
        .map(|e| quote!(.preserve_rng_state(#e)));
    // `auto`: the active plan turns the checkpoint on or off, at run time,
    // inside the runtime (no branch here).
    let auto = args
        .auto
        .as_ref()
        .map(|auto| quote_spanned!(auto.span()=> .auto()));
    quote!(#determinism #(#hooks)* #strict #early_stop #backward_inside #preserve_rng_state #auto)
}
