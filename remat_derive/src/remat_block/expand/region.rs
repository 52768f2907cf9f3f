//! A region's code: its arguments evaluated first, as bare code, then the
//! runtime call that runs (or skips) the region.
//!
//! `let attn = save attention: self.attention.forward(&h, mask);` becomes
//!
//! ```text
//! let __remat_a0 = &h;                    // arguments first, as bare code
//! let __remat_a0 = ::remat::__private::arg({ __remat_a0 });
//! let __remat_a1 = mask;
//! let __remat_a1 = ::remat::__private::arg({ __remat_a1 });
//! let attn = ::remat::region("attention", ::remat::Policy::Save).call_saved(
//!     (__remat_a0, __remat_a1),
//!     |(__remat_a0, __remat_a1,)| self.attention.forward(__remat_a0, __remat_a1),
//! );
//! ```
//!
//! `call_saved` hands bare code the output wrapped in `Saved` (a region that
//! may be skipped: `save`, `auto`, `region [..]`); a `recompute` region's
//! `call` hands it plain. Either opens save outputs among the arguments
//! (each an `Arg`) for the body (docs/dsl.md, rules Y1 and Y3).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::Expr;

use crate::remat_block::ast::{PolicyKind, Region};

/// The `let`s evaluating a region's arguments, and the runtime call.
pub(crate) fn region(region: &Region) -> (TokenStream, TokenStream) {
    let span = region.policy.span;
    let args: Vec<&Expr> = region.call.args().collect();
    let locals = locals(&args);
    let mut lets = argument_lets(&locals, &args);
    let body = body(region, &locals, &args);
    let name = region.name.tokens();
    let policy = policy(region, &mut lets);
    // docs/dsl.md, rule Y1: only a `recompute` region hands its output
    // to bare code readable.
    let call_fn = match region.policy.kind {
        PolicyKind::Recompute => quote_spanned!(span=> call),
        _ => quote_spanned!(span=> call_saved),
    };
    // Spanned at the policy keyword: `region` is `#[track_caller]` and
    // records the user's line.
    let call = quote_spanned! {span=>
        ::remat::region(#name, #policy).#call_fn(
            (#(#locals,)*),
            |(#(#locals,)*)| #body,
        )
    };
    (lets, call)
}

/// The locals that hold the arguments, one each.
///
/// Mixed-site hygiene, at the argument's place: an error about an argument
/// (its type, in the body's call) points at what the user wrote, not at
/// the whole macro.
fn locals(args: &[&Expr]) -> Vec<syn::Ident> {
    args.iter()
        .enumerate()
        .map(|(i, arg)| {
            let at = Span::mixed_site().located_at(syn::spanned::Spanned::span(*arg));
            format_ident!("__remat_a{}", i, span = at)
        })
        .collect()
}

/// Each argument bound as written (so that `&temporary` lives to the end
/// of the block, as in a `let`), then checked where it is written: a type
/// that is no region argument is reported at it.
fn argument_lets(locals: &[syn::Ident], args: &[&Expr]) -> TokenStream {
    let mut lets = TokenStream::new();
    for (local, arg) in locals.iter().zip(args) {
        if is_none(arg) {
            quote!(let #local = ::remat::__private::arg(());).to_tokens(&mut lets);
            continue;
        }
        let arg_span = syn::spanned::Spanned::span(arg);
        quote!(let #local = #arg;).to_tokens(&mut lets);
        // In a block at the argument's place: rustc reports an unmet
        // bound at the expression it was required for.
        let at_arg = quote_spanned!(arg_span=> { #local });
        quote_spanned!(arg_span=> let #local = ::remat::__private::arg(#at_arg);)
            .to_tokens(&mut lets);
    }
    lets
}

/// The region's body: its call, on the locals instead of the arguments.
fn body(region: &Region, locals: &[syn::Ident], args: &[&Expr]) -> Expr {
    region
        .call
        .with_args(locals.iter().zip(args).map(|(local, arg)| {
            // A literal `None` holds no tensor: it stays in the call, where
            // the callee's parameter gives it its type (an `Option<&Tensor>`
            // mask), instead of becoming an input whose type nothing fixes.
            if is_none(arg) {
                return (*arg).clone();
            }
            Expr::Path(syn::ExprPath {
                attrs: Vec::new(),
                qself: None,
                path: local.clone().into(),
            })
        }))
}

/// The `remat::Policy` the region call is given; a run-time policy is
/// bound in `lets` first.
fn policy(region: &Region, lets: &mut TokenStream) -> TokenStream {
    let span = region.policy.span;
    match region.policy.kind {
        PolicyKind::Save => quote_spanned!(span=> ::remat::Policy::Save),
        PolicyKind::Recompute => quote_spanned!(span=> ::remat::Policy::Recompute),
        // The active plan decides (the runtime's `Policy::Auto`).
        PolicyKind::Auto => quote_spanned!(span=> ::remat::Policy::Auto),
        PolicyKind::Dynamic => {
            // Evaluated before the arguments' region runs, once per run
            // of the body; typed here so that a wrong type is reported
            // at the expression.
            let local = syn::Ident::new("__remat_policy", Span::mixed_site());
            let expr = region.policy_expr.as_deref();
            let expr_span = expr.map_or(span, syn::spanned::Spanned::span);
            quote_spanned!(expr_span=> let #local: ::remat::Policy = #expr;).to_tokens(lets);
            quote!(#local)
        }
    }
}

/// Whether `arg` is the literal `None` (a path of that one segment).
fn is_none(arg: &Expr) -> bool {
    match arg {
        Expr::Path(p) => p.qself.is_none() && p.path.is_ident("None"),
        _ => false,
    }
}
