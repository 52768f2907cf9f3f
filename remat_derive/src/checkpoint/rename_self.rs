//! Renaming `self` in a `#[checkpoint]` body: the body becomes a closure,
//! which cannot bind `self`, so the receiver's capture is bound as
//! `__remat_self` (`closure_self`) and every use of `self` is renamed to
//! it, in macro arguments too.

use proc_macro2::{Group, Ident, TokenStream, TokenTree};
use syn::visit_mut::{self, VisitMut};
use syn::Expr;

use crate::closure_self::CLOSURE_SELF;

/// Renames `self` to `__remat_self` in the body (a closure cannot bind
/// `self`), outside nested items, which have their own `self`.
pub(crate) struct RenameSelf;

impl VisitMut for RenameSelf {
    /// `self` as an expression, the one path renamed.
    fn visit_expr_path_mut(&mut self, expr: &mut syn::ExprPath) {
        if expr.qself.is_none()
            && expr.path.leading_colon.is_none()
            && expr.path.segments.len() == 1
        {
            let segment = &mut expr.path.segments[0];
            if segment.ident == "self" {
                segment.ident = Ident::new(CLOSURE_SELF, segment.ident.span());
            }
        }
        visit_mut::visit_expr_path_mut(self, expr);
    }

    /// Macro arguments are tokens; `self` in them is renamed too.
    fn visit_macro_mut(&mut self, mac: &mut syn::Macro) {
        mac.tokens = rename_tokens(std::mem::take(&mut mac.tokens));
    }

    /// Expressions syn kept as tokens are renamed as tokens.
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        if let Expr::Verbatim(tokens) = expr {
            *tokens = rename_tokens(std::mem::take(tokens));
            return;
        }
        visit_mut::visit_expr_mut(self, expr);
    }

    /// A nested item has its own `self`.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// `self` renamed in tokens (a macro's arguments), at any depth.
fn rename_tokens(tokens: TokenStream) -> TokenStream {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len());
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Group(group) => {
                let mut renamed = Group::new(group.delimiter(), rename_tokens(group.stream()));
                renamed.set_span(group.span());
                out.push(TokenTree::Group(renamed));
            }
            // `self::path` names a module, not the receiver.
            TokenTree::Ident(ident)
                if ident == "self"
                    && !matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':') =>
            {
                out.push(TokenTree::Ident(Ident::new(CLOSURE_SELF, ident.span())));
            }
            other => out.push(other.clone()),
        }
    }
    out.into_iter().collect()
}
