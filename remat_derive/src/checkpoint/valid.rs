//! What `#[checkpoint]` refuses, reported all at once: a signature its
//! replay cannot honour (`async`, `const`, variadic, `&mut` parameters),
//! and `#[remat(..)]` anywhere (`gone_attr`).
//!
//! A refused signature makes the expansion leave the body an ordinary
//! function body, so that rustc adds no follow-on errors (such as a `&mut`
//! receiver that cannot be captured); `#[remat(..)]` is only reported, the
//! checkpoint still expands without it.

use quote::ToTokens;
use syn::Signature;

use crate::checkpoint::ast::{Checkpoint, Param};
use crate::checkpoint::param_kind::Kind;
use crate::errors::push_error;

/// What the checks found.
pub(crate) struct Verdict {
    /// Every error, in the order of the input.
    pub errors: Option<syn::Error>,
    /// The signature is refused: the function is left unexpanded.
    pub refused: bool,
}

impl Verdict {
    /// An error that refuses the signature.
    fn refuse(&mut self, error: syn::Error) {
        self.refused = true;
        push_error(&mut self.errors, error);
    }
}

/// Checks the signature, the function's attributes, its parameters and its
/// body, in that order.
pub(crate) fn check(checkpoint: &Checkpoint) -> Verdict {
    let mut verdict = Verdict {
        errors: None,
        refused: false,
    };
    for error in signature_errors(&checkpoint.sig) {
        verdict.refuse(error);
    }
    for attr in &checkpoint.gone_attrs {
        push_error(&mut verdict.errors, crate::gone_attr::error(attr));
    }
    for param in &checkpoint.params {
        if let Some(error) = param_error(param) {
            verdict.refuse(error);
        }
    }
    if let Some(error) = &checkpoint.gone_in_body {
        push_error(&mut verdict.errors, error.clone());
    }
    verdict
}

/// `async`, `const` and variadic functions, which replay cannot run again.
fn signature_errors(sig: &Signature) -> Vec<syn::Error> {
    let mut errors = Vec::new();
    if let Some(token) = &sig.asyncness {
        errors.push(syn::Error::new(
            token.span,
            "a `#[checkpoint]` function cannot be `async`: its body is replayed \
             synchronously inside backward",
        ));
    }
    if let Some(token) = &sig.constness {
        errors.push(syn::Error::new(
            token.span,
            "a `#[checkpoint]` function cannot be `const`",
        ));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new_spanned(
            variadic,
            "a `#[checkpoint]` function cannot be variadic",
        ));
    }
    errors
}

/// A `&mut` receiver or parameter.
fn param_error(param: &Param) -> Option<syn::Error> {
    match param {
        Param::Receiver(receiver) if receiver.mut_ref => Some(mut_error(&receiver.written)),
        Param::Typed(typed) if matches!(typed.kind, Kind::MutRef) => Some(mut_error(&typed.ty)),
        _ => None,
    }
}

/// A `&mut` parameter or receiver: replay runs the body again during
/// backward, after that borrow has ended.
fn mut_error(at: &dyn ToTokens) -> syn::Error {
    syn::Error::new_spanned(
        at,
        "a `#[checkpoint]` function is replayed during backward, so it cannot take \
         `&mut` parameters: take `&T` or an owned value",
    )
}
