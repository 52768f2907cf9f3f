//! The guard against `remat!` blocks the check cannot see (docs/dsl.md,
//! rule X15).
//!
//! `#[checkpoint]` expands the `remat!` blocks written in its body itself,
//! after checking them. A `remat!` that only a macro's expansion produces
//! (a `macro_rules!` defined outside the function, whose tokens are not in
//! the body) would reach rustc unchecked. Names of macros in a
//! `macro_rules!` expansion resolve where the macro is invoked, so a local
//! `macro_rules! remat` at the top of the body catches every such
//! invocation and turns it into a compile error. A statement marked
//! `#[remat(unchecked)]` gets the real macro back for itself: a forwarding
//! definition before it, the refusing one again after it.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::visit_mut::{self, VisitMut};

use crate::unchecked_attr;

const MESSAGE: &str = "this `remat!` comes from a macro's expansion, which the check of \
    `#[checkpoint]` cannot see: write the `remat!` block in the function's body, or put \
    `#[remat(unchecked)]` on the statement that invokes the macro (reads the check cannot \
    see fail on replay), or call `::remat::remat!` by its path";

/// The definition that refuses. Empty input expands to nothing: the
/// expansion leaves `remat! {}` where each checked block was (see
/// `expand::used_marker`).
pub(crate) fn refusing() -> syn::Stmt {
    let name = syn::Ident::new("remat", Span::call_site());
    stmt(quote! {
        #[allow(unused_macros)]
        macro_rules! #name {
            () => {};
            ($($tokens:tt)*) => { ::core::compile_error! { #MESSAGE } };
        }
    })
}

/// Puts the refusing definition first in `block`. When the expansion left
/// markers invoking `remat!` by its bare name, one more marker goes before
/// the definition: it resolves to the user's import, as the markers did
/// before the guard shadowed them, so the import stays used.
pub(crate) fn guard(block: &mut syn::Block) {
    let mut find = FindBareMarker(false);
    syn::visit::Visit::visit_block(&mut find, block);
    block.stmts.insert(0, refusing());
    if find.0 {
        let name = syn::Ident::new("remat", Span::call_site());
        block.stmts.insert(0, stmt_tokens(quote!(#name! {})));
    }
}

struct FindBareMarker(bool);

impl<'ast> syn::visit::Visit<'ast> for FindBareMarker {
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.0 |= mac.path.is_ident("remat") && mac.tokens.is_empty();
    }
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

fn stmt_tokens(tokens: TokenStream) -> syn::Stmt {
    syn::parse2(tokens).expect("a macro statement")
}

/// The definition that forwards to the real macro.
fn forwarding() -> syn::Stmt {
    let name = syn::Ident::new("remat", Span::call_site());
    stmt(quote! {
        #[allow(unused_macros)]
        macro_rules! #name {
            ($($tokens:tt)*) => { ::remat::remat! { $($tokens)* } };
        }
    })
}

fn stmt(tokens: TokenStream) -> syn::Stmt {
    syn::Stmt::Item(syn::parse2(tokens).expect("a macro_rules! item"))
}

/// Around every `#[remat(unchecked)]` statement that invokes a macro, at
/// any depth outside nested items: the forwarding definition before it,
/// the refusing one after it (unless it is a block's tail). Runs before
/// the attributes are stripped.
pub(crate) struct AroundUnchecked;

impl VisitMut for AroundUnchecked {
    fn visit_block_mut(&mut self, block: &mut syn::Block) {
        visit_mut::visit_block_mut(self, block);
        let count = block.stmts.len();
        let mut stmts = Vec::with_capacity(count);
        for (i, stmt) in std::mem::take(&mut block.stmts).into_iter().enumerate() {
            let unchecked =
                unchecked_attr::unchecked(unchecked_attr::stmt_attrs(&stmt)).unwrap_or(false);
            if !(unchecked && invokes_macro(&stmt)) {
                stmts.push(stmt);
                continue;
            }
            let tail = i + 1 == count && matches!(stmt, syn::Stmt::Expr(_, None));
            stmts.push(forwarding());
            stmts.push(stmt);
            if !tail {
                stmts.push(refusing());
            }
        }
        block.stmts = stmts;
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

fn invokes_macro(stmt: &syn::Stmt) -> bool {
    struct Find(bool);
    impl<'ast> syn::visit::Visit<'ast> for Find {
        fn visit_macro(&mut self, _: &'ast syn::Macro) {
            self.0 = true;
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut find = Find(false);
    syn::visit::Visit::visit_stmt(&mut find, stmt);
    find.0
}
