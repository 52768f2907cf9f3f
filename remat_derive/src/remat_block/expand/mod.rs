//! Code generation for `remat!`: statements stay statements, regions become
//! calls of the runtime (`region`), `needs x;` becomes
//! `let x = ::remat::needs(x);` (docs/dsl.md, rule Y2) and a scope becomes a
//! guard around its statements.
//!
//! The block expands to plain statements, not a block, so that the user's
//! bindings stay visible after it; generated locals use mixed-site hygiene,
//! so user code can neither see nor clash with them.

mod region;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};

use crate::remat_block::ast::{Invocation, Region, Stmt};
use crate::remat_block::expand::region::region;

/// The code of a parsed invocation: plain statements, or for the expression
/// form a block whose value is the region's output.
pub(crate) fn expand(invocation: &Invocation) -> TokenStream {
    let mut expander = Expander::default();
    match invocation {
        Invocation::Stmts(stmts) => expander.stmts(stmts),
        Invocation::Expr(region) => region_expr(region),
    }
}

/// `remat!(POLICY REGION)`: a block whose value is the region's output.
fn region_expr(region: &Region) -> TokenStream {
    let (args, call) = self::region(region);
    quote!({ #args #call })
}

/// Generates code for statements, numbering scopes as it goes.
#[derive(Default)]
struct Expander {
    /// Numbers the guards of nested scopes, which must not shadow each other.
    scopes: usize,
}

impl Expander {
    /// The statements of a `remat! { }` block, as plain statements.
    fn stmts(&mut self, stmts: &[Stmt]) -> TokenStream {
        let mut out = TokenStream::new();
        for stmt in stmts {
            self.stmt(stmt, &mut out);
        }
        out
    }

    /// One statement, appended to `out`.
    fn stmt(&mut self, stmt: &Stmt, out: &mut TokenStream) {
        match stmt {
            Stmt::Region(stmt) => {
                let (args, call) = region(&stmt.region);
                args.to_tokens(out);
                let attrs = &stmt.attrs;
                match &stmt.pat {
                    Some(pat) => quote!(#(#attrs)* let #pat = #call;).to_tokens(out),
                    None => quote!(#(#attrs)* #call;).to_tokens(out),
                }
            }
            Stmt::Needs(stmt) => {
                // docs/dsl.md, rule Y2: the name now holds the marked value.
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
                let name = stmt.name.tokens();
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
}
