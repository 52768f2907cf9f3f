//! `#[checkpoint]`: a function whose body becomes a checkpoint's closure.
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
//! Replay runs inside backward, after the call returned, so the closure must
//! own what it uses (`'static`) and may run more than once (`Fn`). Tensor
//! parameters are the checkpoint's inputs and arrive owned in the closure;
//! everything else, `self` included, is captured through `Capture` before
//! the call and used by reference inside.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::parse::Parse;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{AttrStyle, FnArg, ItemFn, LitStr, Pat, Type};

use crate::checkpoint_args::CheckpointArgs;
use crate::errors::{parse_to_end, push_error};
use crate::name::Name;
use crate::param_kind::{classify, has_impl_trait, has_lifetime, mut_error, Kind};
use crate::rename_self::RenameSelf;
use crate::returned::Returned;

/// Entry point of `#[checkpoint]`.
pub(crate) fn checkpoint(args: TokenStream, item: TokenStream) -> TokenStream {
    if let Some(error) =
        crate::depth_limit::check(&args).or_else(|| crate::depth_limit::check(&item))
    {
        // The function is left as written: rustc parses deep code itself.
        let error = error.to_compile_error();
        return quote!(#error #item);
    }
    let mut errors = None;
    let args = parse_to_end(CheckpointArgs::parse, args).unwrap_or_else(|error| {
        push_error(&mut errors, error);
        CheckpointArgs::default()
    });
    let func: ItemFn = match parse_to_end(ItemFn::parse, item.clone()) {
        Ok(func) => func,
        Err(error) => {
            push_error(
                &mut errors,
                syn::Error::new(
                    error.span(),
                    format!("`#[checkpoint]` applies to a function or method with a body: {error}"),
                ),
            );
            let errors = errors.map(|e| e.to_compile_error());
            return quote!(#errors #item);
        }
    };
    let (out, more) = Expand::new(args, func).run();
    if let Some(more) = more {
        push_error(&mut errors, more);
    }
    let errors = errors.map(|e| e.to_compile_error());
    match out {
        Some(out) => insert_errors(out, errors),
        None => quote!(#errors #item),
    }
}

/// Puts the errors first inside the function body, so that they are emitted
/// whether the function is a free function or a method.
fn insert_errors(out: Output, errors: Option<TokenStream>) -> TokenStream {
    let Output {
        attrs,
        inner_attrs,
        vis,
        sig,
        body,
    } = out;
    quote! {
        #(#attrs)*
        #vis #sig {
            #(#inner_attrs)*
            #errors
            #body
        }
    }
}

struct Output {
    attrs: Vec<syn::Attribute>,
    inner_attrs: Vec<syn::Attribute>,
    vis: syn::Visibility,
    sig: syn::Signature,
    body: TokenStream,
}

struct Expand {
    args: CheckpointArgs,
    func: ItemFn,
    errors: Option<syn::Error>,
    /// The signature is refused (`&mut`, `async`, ...): the body is then
    /// emitted as a plain function body, so that rustc adds no follow-on
    /// errors (such as a `&mut` receiver that cannot be captured).
    refused: bool,
}

impl Expand {
    fn new(args: CheckpointArgs, func: ItemFn) -> Self {
        Expand {
            args,
            func,
            errors: None,
            refused: false,
        }
    }

    fn error(&mut self, error: syn::Error) {
        push_error(&mut self.errors, error);
    }

    fn run(mut self) -> (Option<Output>, Option<syn::Error>) {
        self.check_signature();
        let (attrs, inner_attrs) = self.attrs();
        let mut sig = self.func.sig.clone();

        let mut captures = TokenStream::new();
        let mut inputs = Vec::new();
        let mut closure_params = Vec::new();
        let mut rebinds = TokenStream::new();
        let mut receiver = None;

        for (i, arg) in sig.inputs.iter_mut().enumerate() {
            match arg {
                FnArg::Receiver(recv) => {
                    let by_ref = match (&recv.reference, &*recv.ty) {
                        (Some(_), _) => true,
                        (None, Type::Reference(_)) if recv.colon_token.is_some() => true,
                        _ => false,
                    };
                    let is_mut_ref = recv.reference.is_some() && recv.mutability.is_some()
                        || matches!(&*recv.ty, Type::Reference(r) if r.mutability.is_some());
                    if is_mut_ref {
                        self.error(mut_error(&*recv));
                        self.refused = true;
                    }
                    let span = recv.self_token.span;
                    let cap = Ident::new("__remat_cap_self", Span::mixed_site());
                    let this = Ident::new("__remat_self", span);
                    let owned_mut = recv.reference.is_none() && recv.mutability.take().is_some();
                    if by_ref {
                        quote_spanned!(span=> let #cap = ::remat::Capture::capture(self);)
                            .to_tokens(&mut captures);
                        quote!(let #this = &#cap;).to_tokens(&mut rebinds);
                    } else {
                        // One use of the trait (through a function
                        // pointer), so that a type that cannot be captured
                        // is one error, not two.
                        let mutability = owned_mut.then(|| quote!(mut));
                        let func = Ident::new("__remat_capfn_self", Span::mixed_site());
                        quote_spanned!(span=>
                            let #func: fn(&Self) -> Self = <Self as ::remat::Capture>::capture;
                            let #cap = #func(&self);
                        )
                        .to_tokens(&mut captures);
                        quote!(let #mutability #this = #func(&#cap);).to_tokens(&mut rebinds);
                    }
                    receiver = Some(());
                }
                FnArg::Typed(typed) => {
                    let kind = match classify(&typed.ty) {
                        Ok(kind) => kind,
                        Err(error) => {
                            self.error(error);
                            self.refused = true;
                            Kind::Capture { by_ref: true }
                        }
                    };
                    let inner = (*typed.pat).clone();
                    let outer = match &*typed.pat {
                        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                            p.ident.clone()
                        }
                        _ => format_ident!("__remat_arg{}", i, span = Span::mixed_site()),
                    };
                    // The signature binds a plain name: the pattern (with its
                    // `mut`) moves inside, where the value is used.
                    *typed.pat = Pat::Ident(syn::PatIdent {
                        attrs: Vec::new(),
                        by_ref: None,
                        mutability: None,
                        ident: outer.clone(),
                        subpat: None,
                    });
                    let ty_span = typed.ty.span();
                    match kind {
                        Kind::Tensor => {
                            inputs.push(quote!(#outer));
                            closure_params.push(inner.to_token_stream());
                        }
                        Kind::TensorRef
                        | Kind::TensorOption
                        | Kind::TensorSlice
                        | Kind::TensorVec => {
                            let (input, rebind) = match kind {
                                Kind::TensorRef => (quote!(#outer), quote!(&#outer)),
                                Kind::TensorOption => (quote!(#outer), quote!(#outer.as_ref())),
                                Kind::TensorSlice => (quote!(#outer), quote!(#outer.as_slice())),
                                _ => (quote!(#outer.as_slice()), quote!(&#outer)),
                            };
                            inputs.push(input);
                            closure_params.push(outer.to_token_stream());
                            quote!(let #inner = #rebind;).to_tokens(&mut rebinds);
                        }
                        // `_: T` is neither used nor needed in the body.
                        Kind::Capture { .. } if matches!(inner, Pat::Wild(_)) => {}
                        Kind::Capture { by_ref } => {
                            // A parameter that only the attribute's own
                            // expressions use (`enabled = on`) is used
                            // outside the closure; its copy inside is not.
                            if self.args_mention(&outer) {
                                quote!(#[allow(unused_variables)]).to_tokens(&mut rebinds);
                            }
                            let cap = format_ident!("__remat_cap{}", i, span = Span::mixed_site());
                            if by_ref {
                                quote_spanned!(ty_span=> let #cap = ::remat::Capture::capture(#outer);)
                                    .to_tokens(&mut captures);
                                quote!(let #inner = &#cap;).to_tokens(&mut rebinds);
                            } else if has_impl_trait(&typed.ty) || has_lifetime(&typed.ty) {
                                // `impl Trait` cannot be named in a type, and a
                                // type with a lifetime makes `fn(&T) -> T` fail
                                // elision: the function item is instantiated
                                // once, at the type inferred from the
                                // parameter, so that this is still one use of
                                // the trait.
                                let func =
                                    format_ident!("__remat_capfn{}", i, span = Span::mixed_site());
                                quote_spanned!(ty_span=>
                                    let #func = <_ as ::remat::Capture>::capture;
                                    let #cap = #func(&#outer);
                                )
                                .to_tokens(&mut captures);
                                quote!(let #inner = #func(&#cap);).to_tokens(&mut rebinds);
                            } else {
                                // One use of the trait (see `self` above).
                                let ty = &typed.ty;
                                let func =
                                    format_ident!("__remat_capfn{}", i, span = Span::mixed_site());
                                quote_spanned!(ty_span=>
                                    let #func: fn(&#ty) -> #ty = <#ty as ::remat::Capture>::capture;
                                    let #cap = #func(&#outer);
                                )
                                .to_tokens(&mut captures);
                                quote!(let #inner = #func(&#cap);).to_tokens(&mut rebinds);
                            }
                        }
                    }
                }
            }
        }

        // `#[remat(unchecked)]` is gone: refused, and taken out of the body
        // so that rustc reports nothing more about it.
        let mut errors = None;
        let tokens = crate::gone_attr::strip(self.func.block.to_token_stream(), &mut errors);
        if let Some(errors) = errors {
            self.error(errors);
        }
        let mut block: syn::Block =
            syn::parse2(tokens).unwrap_or_else(|_| (*self.func.block).clone());
        if self.refused {
            // The errors say what to change; the body stays an ordinary
            // function body meanwhile.
            let stmts = &block.stmts;
            let out = Output {
                attrs,
                inner_attrs,
                vis: self.func.vis.clone(),
                sig: self.func.sig.clone(),
                body: quote!(#(#stmts)*),
            };
            return (Some(out), self.errors);
        }
        // The body as written, for `enabled = false`: its value leaves through
        // `returned_plain` (docs/dsl.md, rule T4).
        let plain = self.args.enabled.is_some().then(|| {
            let mut plain = block.clone();
            Returned::plain().visit_body(&mut plain);
            plain
        });
        Returned::inside().visit_body(&mut block);
        if receiver.is_some() {
            RenameSelf.visit_block_mut(&mut block);
        }
        let stmts = &block.stmts;

        let name = match &self.args.name {
            Some(Name::Static { value, span }) => LitStr::new(value, *span).to_token_stream(),
            Some(Name::Dynamic(expr)) => expr.to_token_stream(),
            None => {
                let ident = &self.func.sig.ident;
                let value = syn::ext::IdentExt::unraw(ident).to_string();
                LitStr::new(&value, ident.span()).to_token_stream()
            }
        };
        let determinism = self
            .args
            .determinism
            .as_ref()
            .map(|d| quote!(.determinism(::remat::Determinism::#d)));
        let hooks = self
            .args
            .state_hooks
            .iter()
            .map(|h| quote!(.state_hook(#h)));
        let ret = match &self.func.sig.output {
            syn::ReturnType::Type(arrow, ty) if !has_impl_trait(ty) => quote!(#arrow #ty),
            _ => TokenStream::new(),
        };
        let strict = self
            .args
            .strict
            .as_ref()
            .map(|s| quote!(.strict_recompute(#s)));
        // docs/semantics.md, rule C18: early stop switched per checkpoint.
        let early_stop = self
            .args
            .early_stop
            .as_ref()
            .map(|e| quote!(.early_stop(#e)));
        // docs/semantics.md, rule C16: a body that computes gradients itself.
        let backward_inside = self
            .args
            .backward_inside
            .as_ref()
            .map(|e| quote!(.backward_inside(#e)));
        // docs/semantics.md, rule C14: the random state kept, or not.
        let preserve_rng_state = self
            .args
            .preserve_rng_state
            .as_ref()
            .map(|e| quote!(.preserve_rng_state(#e)));
        // `auto`: the active plan turns the checkpoint on or off, at run
        // time, inside the runtime (no branch here).
        let auto = self
            .args
            .auto
            .as_ref()
            .map(|auto| quote_spanned!(auto.span()=> .auto()));
        let call = quote! {
            #captures
            ::remat::checkpoint(#name) #determinism #(#hooks)* #strict #early_stop #backward_inside #preserve_rng_state #auto
                .call((#(#inputs,)*), move |(#(#closure_params,)*)| #ret {
                    #rebinds
                    #(#stmts)*
                })
        };
        // `enabled = EXPR`: off runs the body as written (its regions run
        // plainly outside a checkpoint), at the cost of one branch.
        let body = match (&self.args.enabled, plain) {
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
        };
        let out = Output {
            attrs,
            inner_attrs,
            vis: self.func.vis.clone(),
            sig,
            body,
        };
        (Some(out), self.errors)
    }

    /// Whether the attribute's expressions (`name`, `enabled`, `strict`,
    /// `early_stop`, `backward_inside`, `preserve_rng_state`, the state
    /// hooks) name `ident`.
    fn args_mention(&self, ident: &syn::Ident) -> bool {
        fn mentions(tokens: TokenStream, ident: &syn::Ident) -> bool {
            tokens.into_iter().any(|tree| match tree {
                proc_macro2::TokenTree::Ident(i) => i == *ident,
                proc_macro2::TokenTree::Group(g) => mentions(g.stream(), ident),
                _ => false,
            })
        }
        let args = &self.args;
        let name = match &args.name {
            Some(Name::Dynamic(expr)) => Some(&**expr),
            _ => None,
        };
        name.into_iter()
            .chain(&args.enabled)
            .chain(&args.strict)
            .chain(&args.early_stop)
            .chain(&args.backward_inside)
            .chain(&args.preserve_rng_state)
            .chain(&args.state_hooks)
            .any(|expr| mentions(expr.to_token_stream(), ident))
    }

    fn check_signature(&mut self) {
        let sig = &self.func.sig;
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
        self.refused |= !errors.is_empty();
        for error in errors {
            self.error(error);
        }
    }

    /// The outer and inner attributes of the function; `#[remat]` does not
    /// belong there.
    fn attrs(&mut self) -> (Vec<syn::Attribute>, Vec<syn::Attribute>) {
        let mut outer = Vec::new();
        let mut inner = Vec::new();
        for attr in self.func.attrs.clone() {
            if attr.path().is_ident("remat") {
                if let Err(error) = crate::gone_attr::refuse(vec![attr]) {
                    self.error(error);
                }
                continue;
            }
            match attr.style {
                AttrStyle::Outer => outer.push(attr),
                AttrStyle::Inner(_) => inner.push(attr),
            }
        }
        (outer, inner)
    }
}
