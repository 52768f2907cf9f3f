//! A `#[checkpoint]` body's return positions: a save output returned there
//! leaves the checkpoint, which rule K5 of docs/semantics.md allows without
//! a mark, so its `Saved` wrapper comes off there, and only there
//! (docs/dsl.md, rule Y4).
//!
//! This is syntax, not an analysis: it wraps the local names (and tuples of
//! them, and `remat!(..)` expressions) that stand in a return position (the
//! body's tail, through blocks, `if` and `match` arms, and `return`
//! expressions outside closures, `async` blocks and nested items) in
//! `::remat::__private::returned(..)`. Whatever it wraps is returned, so a
//! wrap can never let bare code read a value; an expression it does not
//! wrap keeps its type, and a `Saved` there is a type error naming it. Only
//! names are wrapped because their type is known without the return type:
//! a `collect()` or `into()` in the tail still gets it from the signature.

use proc_macro2::Span;
use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, Stmt};

/// Wraps a body's return positions in one of the runtime's two functions.
pub(crate) struct Returned {
    /// `returned` inside the checkpoint's closure, `returned_plain` where
    /// the body runs in its caller (`enabled = false`).
    function: &'static str,
}

impl Returned {
    /// Inside the checkpoint's closure.
    pub(crate) fn inside() -> Self {
        Returned {
            function: "returned",
        }
    }

    /// Where the body runs in its caller (`enabled = false`).
    pub(crate) fn plain() -> Self {
        Returned {
            function: "returned_plain",
        }
    }

    /// Wraps the tail of the body and its `return`s.
    pub(crate) fn visit_body(&self, block: &mut syn::Block) {
        if let Some(Stmt::Expr(tail, None)) = block.stmts.last_mut() {
            self.wrap(tail);
        }
        Returns(self).visit_block_mut(block);
    }

    /// Wraps `expr`, a value in return position: names and `remat!(..)`
    /// whole, tuples, blocks and branches by their parts.
    fn wrap(&self, expr: &mut Expr) {
        match expr {
            Expr::Path(path) if path.qself.is_none() && path.path.get_ident().is_some() => {
                self.call(expr)
            }
            Expr::Macro(mac)
                if mac
                    .mac
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "remat") =>
            {
                self.call(expr)
            }
            Expr::Tuple(tuple) => tuple.elems.iter_mut().for_each(|e| self.wrap(e)),
            Expr::Paren(paren) => self.wrap(&mut paren.expr),
            Expr::Block(block) if block.label.is_none() => self.wrap_tail(&mut block.block),
            Expr::Unsafe(block) => self.wrap_tail(&mut block.block),
            Expr::If(expr_if) => {
                self.wrap_tail(&mut expr_if.then_branch);
                if let Some((_, other)) = &mut expr_if.else_branch {
                    self.wrap(other);
                }
            }
            Expr::Match(expr_match) => {
                for arm in &mut expr_match.arms {
                    self.wrap(&mut arm.body);
                }
            }
            _ => {}
        }
    }

    /// Wraps a block's tail expression, its value.
    fn wrap_tail(&self, block: &mut syn::Block) {
        if let Some(Stmt::Expr(tail, None)) = block.stmts.last_mut() {
            self.wrap(tail);
        }
    }

    /// Replaces `expr` by the runtime function's call on it.
    fn call(&self, expr: &mut Expr) {
        let span = expr.span().resolved_at(Span::mixed_site());
        let function = syn::Ident::new(self.function, span);
        let inner = std::mem::replace(expr, Expr::Verbatim(Default::default()));
        *expr = Expr::Verbatim(quote_spanned!(span=> ::remat::__private::#function(#inner)));
    }
}

/// Finds the `return`s that leave the function (not those of closures,
/// `async` blocks or nested items).
struct Returns<'a>(&'a Returned);

impl VisitMut for Returns<'_> {
    /// Wraps the value of each `return` that leaves the function;
    /// closures and `async` blocks return from themselves.
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        match expr {
            Expr::Closure(_) | Expr::Async(_) => {}
            Expr::Return(ret) => {
                if let Some(value) = &mut ret.expr {
                    visit_mut::visit_expr_mut(self, value);
                    self.0.wrap(value);
                }
            }
            _ => visit_mut::visit_expr_mut(self, expr),
        }
    }

    /// A nested item's `return`s are its own.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
