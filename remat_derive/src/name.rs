//! A name given to the runtime: a region's or a scope's in `remat!`, a
//! checkpoint's in `#[checkpoint(name = ..)]`. Both macros accept the same
//! two forms, and the runtime takes either as its `name` argument, so the
//! model and its tokens are shared here.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::{Expr, LitStr};

/// A region, scope or checkpoint name, after defaulting.
#[derive(Clone)]
pub(crate) enum Name {
    /// Known at compile time: an identifier, a string literal or the callee.
    Static { value: String, span: Span },
    /// `[expr]`, evaluated at run time (e.g. a `format!`).
    Dynamic(Box<Expr>),
}

impl Name {
    /// What the runtime is handed: a static name as a string literal at the
    /// name's span, a dynamic one as its expression.
    pub(crate) fn tokens(&self) -> TokenStream {
        match self {
            Name::Static { value, span } => LitStr::new(value, *span).to_token_stream(),
            Name::Dynamic(expr) => expr.to_token_stream(),
        }
    }
}
