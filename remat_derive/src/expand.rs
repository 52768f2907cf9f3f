//! Code generation for `remat!`: regions become calls of the runtime.
//!
//! `let attn = save attention: self.attention.forward(&h, mask);` becomes
//!
//! ```text
//! let __remat_a0 = &h;            // arguments first, as bare code
//! let __remat_a1 = mask;
//! let attn = ::remat::region("attention", ::remat::Policy::Save).call(
//!     (::remat::__private::input(__remat_a0), ::remat::__private::input(__remat_a1),),
//!     |(__remat_a0, __remat_a1,)| self.attention.forward(__remat_a0, __remat_a1),
//! );
//! ```
//!
//! Generated locals use mixed-site hygiene, so user code can neither see nor
//! clash with them; user bindings keep their spans and stay visible after the
//! block, which expands to plain statements.

use std::rc::Rc;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::parse::Parser;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, LitStr};

use crate::ast::{self, Invocation, Mode, Name, PolicyKind, Region, Stmt};
use crate::check::Checker;
use crate::errors::push_error;
use crate::parse;
use crate::preparsed::Table;
use crate::unchecked_attr;

/// The most arguments a region call may take (the runtime implements its
/// inputs for tuples up to this arity).
const MAX_ARGS: usize = 12;

/// Entry point of `remat!`.
pub(crate) fn remat(input: TokenStream) -> TokenStream {
    if let Some(error) = crate::depth_limit::check(&input) {
        return error.to_compile_error();
    }
    let (invocation, mut errors) = parse::parse_invocation(input);
    let mut expander = Expander::default();
    match &invocation {
        Invocation::Stmts(stmts) => {
            // A standalone block checks only its own statements.
            let mut checker = Checker::new(Mode::Block);
            checker.remat_stmts(stmts);
            if let Some(error) = checker.finish() {
                push_error(&mut errors, error);
            }
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
                let span = stmt.needs.span();
                for (expr, dropped) in stmt.exprs.iter().zip(&stmt.dropped) {
                    // The check reported the name as unknown: no E0425 too.
                    if dropped.get() {
                        continue;
                    }
                    quote_spanned!(span=> ::remat::recompute_needs_tensor(&#expr);).to_tokens(out);
                }
            }
            Stmt::MissingCall(stmt) if stmt.refused.get() => {
                // The error takes the place of the value: the pattern's
                // names then have rustc's error type, so neither the
                // keyword nor any later use of them is reported again.
                let mut local = stmt.local.clone();
                local.attrs.retain(|a| !a.path().is_ident("remat"));
                let message = parse::missing_call(&stmt.keyword.to_string());
                let error = quote_spanned!(stmt.keyword.span()=> ::core::compile_error!(#message));
                if let Some(init) = &mut local.init {
                    *init.expr = Expr::Verbatim(error);
                }
                local.to_tokens(out);
            }
            Stmt::MissingCall(stmt) => {
                let mut local = syn::Stmt::Local(stmt.local.clone());
                unchecked_attr::Strip.visit_stmt_mut(&mut local);
                local.to_tokens(out);
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
            Stmt::Bare(stmt) => {
                let mut stmt = (**stmt).clone();
                unchecked_attr::Strip.visit_stmt_mut(&mut stmt);
                stmt.to_tokens(out);
            }
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
        let locals: Vec<syn::Ident> = (0..args.len())
            .map(|i| format_ident!("__remat_a{}", i, span = Span::mixed_site()))
            .collect();
        let mut lets = quote!(#(let #locals = #args;)*);
        let body = region.call.with_args(locals.iter().map(|local| {
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
        // Spanned at the policy keyword: `region` is `#[track_caller]` and
        // records the user's line.
        let call = quote_spanned! {span=>
            ::remat::region(#name, #policy).call(
                (#(::remat::__private::input(#locals),)*),
                |(#(#locals,)*)| #body,
            )
        };
        (lets, call)
    }
}

/// A static name is a string literal; a dynamic one is its expression.
fn name_tokens(name: &Name) -> TokenStream {
    match name {
        Name::Static { value, span } => LitStr::new(value, *span).to_token_stream(),
        Name::Dynamic(expr) => expr.to_token_stream(),
    }
}

/// Expands every `remat!` invocation inside a `#[checkpoint]` body in place,
/// so that the whole body is checked and expanded by the attribute, and the
/// inner macro never runs. Parse errors are emitted where the invocation was.
pub(crate) struct ExpandNested {
    expander: Expander,
    preparsed: Rc<Table>,
}

impl ExpandNested {
    /// Expands the invocations of `preparsed` (the table the check read).
    pub(crate) fn new(preparsed: Rc<Table>) -> Self {
        ExpandNested {
            expander: Expander::default(),
            preparsed,
        }
    }

    /// A `remat!` in statement position: its statements, spliced.
    fn stmts(&mut self, mac: &syn::Macro, semi: Option<syn::Token![;]>) -> Vec<syn::Stmt> {
        let parsed = self.preparsed.get(mac);
        let mut tokens = used_marker(mac);
        if let Some(errors) = &parsed.errors {
            tokens.extend(errors.to_compile_error());
        }
        match &parsed.invocation {
            Invocation::Stmts(stmts) => tokens.extend(self.expander.stmts(stmts)),
            Invocation::Expr(region) => {
                let expr = self.expander.region_expr(region);
                let errors = self.expander.take_errors().map(|e| e.to_compile_error());
                quote!(#errors #expr #semi).to_tokens(&mut tokens);
            }
        }
        reparse_stmts(tokens)
    }

    /// A `remat!` in expression position.
    fn expr(&mut self, mac: &syn::Macro) -> Expr {
        let parsed = self.preparsed.get(mac);
        let mut errors = parsed.errors.clone();
        let marker = used_marker(mac);
        let tokens = match &parsed.invocation {
            Invocation::Expr(region) => {
                let expr = self.expander.region_expr(region);
                if let Some(more) = self.expander.take_errors() {
                    push_error(&mut errors, more);
                }
                match errors {
                    Some(errors) => {
                        let errors = errors.to_compile_error();
                        quote!({ #errors #expr })
                    }
                    None => expr,
                }
            }
            // Statements in expression position: their own block.
            Invocation::Stmts(stmts) => {
                let errors = errors.map(|e| e.to_compile_error());
                let stmts = self.expander.stmts(stmts);
                quote!({ #errors #stmts })
            }
        };
        let tokens = quote!({ #marker #tokens });
        syn::parse2(tokens.clone()).unwrap_or(Expr::Verbatim(tokens))
    }
}

/// `PATH! {}`, with the path the user wrote: it expands to nothing, but it
/// uses the user's import of `remat!` (which the attribute expanded in its
/// place), so that rustc does not report that import as unused.
fn used_marker(mac: &syn::Macro) -> TokenStream {
    let path = &mac.path;
    quote!(#path! {})
}

/// Generated statements back into syn's tree (so that later passes see
/// them); they always parse, but fall back to verbatim tokens regardless.
fn reparse_stmts(tokens: TokenStream) -> Vec<syn::Stmt> {
    match syn::Block::parse_within.parse2(tokens.clone()) {
        Ok(stmts) => stmts,
        Err(_) => vec![syn::Stmt::Expr(Expr::Verbatim(tokens), None)],
    }
}

impl VisitMut for ExpandNested {
    fn visit_block_mut(&mut self, block: &mut syn::Block) {
        let mut out = Vec::with_capacity(block.stmts.len());
        let count = block.stmts.len();
        for (i, stmt) in std::mem::take(&mut block.stmts).into_iter().enumerate() {
            match stmt {
                syn::Stmt::Macro(mac) if ast::is_remat(&mac.mac) => {
                    let mut stmts = self.stmts(&mac.mac, mac.semi_token);
                    // Only the block's tail may end without `;`.
                    if i + 1 < count || mac.semi_token.is_some() {
                        if let Some(syn::Stmt::Expr(_, semi @ None)) = stmts.last_mut() {
                            *semi = Some(Default::default());
                        }
                    }
                    for mut stmt in stmts {
                        // `#[cfg(..)] remat! { .. }`: every statement it
                        // expands to keeps the attributes.
                        unchecked_attr::add_attrs(&mut stmt, &mac.attrs);
                        // Bare code inside may hold further `remat!`s.
                        self.visit_stmt_mut(&mut stmt);
                        out.push(stmt);
                    }
                }
                mut stmt => {
                    self.visit_stmt_mut(&mut stmt);
                    out.push(stmt);
                }
            }
        }
        block.stmts = out;
    }

    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        if let Expr::Macro(mac) = expr {
            if ast::is_remat(&mac.mac) {
                *expr = self.expr(&mac.mac);
            }
        }
        visit_mut::visit_expr_mut(self, expr);
    }

    /// A `remat!` in a nested item belongs to that item: rustc expands it
    /// as a standalone block.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
