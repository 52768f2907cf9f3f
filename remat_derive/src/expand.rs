//! Code generation for `remat!`: regions become calls of the runtime.
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
//! (each an `Arg`) for the body (docs/dsl.md, rules T1 and T3). `needs x;`
//! becomes `let x = ::remat::needs(x);` (rule T2).
//!
//! Generated locals use mixed-site hygiene, so user code can neither see nor
//! clash with them; user bindings keep their spans and stay visible after the
//! block, which expands to plain statements.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::{Expr, LitStr};

use crate::ast::{Invocation, Name, PolicyKind, Region, Stmt};
use crate::errors::push_error;
use crate::parse;

/// The most arguments a region call may take (the runtime implements its
/// inputs for tuples up to this arity).
const MAX_ARGS: usize = 12;

/// Entry point of `remat!`.
pub(crate) fn remat(input: TokenStream) -> TokenStream {
    if let Some(error) = crate::depth_limit::check(&input) {
        return error.to_compile_error();
    }
    // `#[remat(..)]` is gone (docs/dsl.md, section T): refused wherever it
    // stands, bare statements included.
    let mut errors = None;
    let input = crate::gone_attr::strip(input, &mut errors);
    // docs/dsl.md, rule T2: `needs` statements in the blocks inside.
    let input = crate::nested_needs::rewrite(input);
    let (invocation, more) = parse::parse_invocation(input);
    if let Some(more) = more {
        push_error(&mut errors, more);
    }
    let mut expander = Expander::default();
    match &invocation {
        Invocation::Stmts(stmts) => {
            let body = expander.stmts(stmts);
            let errors = errors.map(|e| e.to_compile_error());
            quote!(#errors #body)
        }
        Invocation::Expr(region) => {
            let body = expander.region_expr(region);
            match expander.take_errors() {
                Some(errors) => {
                    let errors = errors.to_compile_error();
                    quote!({ #errors #body })
                }
                None => body,
            }
        }
    }
}

/// Generates code for parsed regions and statements.
#[derive(Default)]
pub(crate) struct Expander {
    /// Numbers the guards of nested scopes, which must not shadow each other.
    scopes: usize,
    errors: Option<syn::Error>,
}

impl Expander {
    /// Errors found while expanding (too many region arguments).
    pub(crate) fn take_errors(&mut self) -> Option<syn::Error> {
        self.errors.take()
    }

    /// The statements of a `remat! { }` block, as plain statements.
    pub(crate) fn stmts(&mut self, stmts: &[Stmt]) -> TokenStream {
        let mut out = TokenStream::new();
        for stmt in stmts {
            self.stmt(stmt, &mut out);
        }
        if let Some(error) = self.take_errors() {
            error.to_compile_error().to_tokens(&mut out);
        }
        out
    }

    fn stmt(&mut self, stmt: &Stmt, out: &mut TokenStream) {
        match stmt {
            Stmt::Region(stmt) => {
                let (args, call) = self.region(&stmt.region);
                args.to_tokens(out);
                let attrs = &stmt.attrs;
                match &stmt.pat {
                    Some(pat) => quote!(#(#attrs)* let #pat = #call;).to_tokens(out),
                    None => quote!(#(#attrs)* #call;).to_tokens(out),
                }
            }
            Stmt::Needs(stmt) => {
                // docs/dsl.md, rule T2: the name now holds the marked value.
                let span = stmt.needs.span();
                let attrs = &stmt.attrs;
                for name in &stmt.names {
                    quote_spanned!(span=> #(#attrs)* let #name = ::remat::needs(#name);)
                        .to_tokens(out);
                }
            }
            Stmt::Scope(stmt) => {
                // Not a block: the scope is reporting only, and bindings made
                // in it stay visible after it.
                let guard =
                    format_ident!("__remat_scope{}", self.scopes, span = Span::mixed_site());
                self.scopes += 1;
                let name = name_tokens(&stmt.name);
                let span = stmt.scope.span();
                quote_spanned!(span=> let #guard = ::remat::__private::enter_scope(#name);)
                    .to_tokens(out);
                for inner in &stmt.stmts {
                    self.stmt(inner, out);
                }
                quote_spanned!(span=> ::core::mem::drop(#guard);).to_tokens(out);
            }
            Stmt::Bare(stmt) => stmt.to_tokens(out),
        }
    }

    /// `remat!(POLICY REGION)`: a block whose value is the region's output.
    pub(crate) fn region_expr(&mut self, region: &Region) -> TokenStream {
        let (args, call) = self.region(region);
        quote!({ #args #call })
    }

    /// The `let`s evaluating a region's arguments, and the runtime call.
    fn region(&mut self, region: &Region) -> (TokenStream, TokenStream) {
        let span = region.policy.span;
        let args: Vec<&Expr> = region.call.args().collect();
        if args.len() > MAX_ARGS {
            push_error(
                &mut self.errors,
                syn::Error::new_spanned(
                    args[MAX_ARGS],
                    format!(
                        "a region call takes at most {MAX_ARGS} arguments; group the \
                         others in a struct passed as `::remat::Opaque(...)`"
                    ),
                ),
            );
        }
        // Mixed-site hygiene, at the argument's place: an error about an
        // argument (its type, in the body's call) points at what the user
        // wrote, not at the whole macro.
        let locals: Vec<syn::Ident> = args
            .iter()
            .enumerate()
            .map(|(i, arg)| {
                let at = Span::mixed_site().located_at(syn::spanned::Spanned::span(*arg));
                format_ident!("__remat_a{}", i, span = at)
            })
            .collect();
        // Each argument is bound as written (so that `&temporary` lives to
        // the end of the block, as in a `let`), then checked where it is
        // written: a type that is no region argument is reported at it.
        let mut lets = TokenStream::new();
        for (local, arg) in locals.iter().zip(&args) {
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
        let body = region
            .call
            .with_args(locals.iter().zip(&args).map(|(local, arg)| {
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
            }));
        let name = name_tokens(&region.name);
        let policy = match region.policy.kind {
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
                quote_spanned!(expr_span=> let #local: ::remat::Policy = #expr;)
                    .to_tokens(&mut lets);
                quote!(#local)
            }
        };
        // docs/dsl.md, rule T1: only a `recompute` region hands its output
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
}

/// Whether `arg` is the literal `None` (a path of that one segment).
fn is_none(arg: &Expr) -> bool {
    match arg {
        Expr::Path(p) => p.qself.is_none() && p.path.is_ident("None"),
        _ => false,
    }
}

/// A static name is a string literal; a dynamic one is its expression.
fn name_tokens(name: &Name) -> TokenStream {
    match name {
        Name::Static { value, span } => LitStr::new(value, *span).to_token_stream(),
        Name::Dynamic(expr) => expr.to_token_stream(),
    }
}
