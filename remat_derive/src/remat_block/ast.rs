//! The model of `remat!`'s syntax: invocations, statements and regions as
//! `parse` builds them, `valid` checks them and `expand` reads them.
//! Nothing here parses; the types only hold what the user wrote, with
//! spans, so that every later error can point at it.

use proc_macro2::Span;
use syn::{Attribute, Expr, ExprCall, ExprMethodCall, Ident, Pat};

use crate::name::Name;

/// What one `remat!` invocation holds.
pub(crate) enum Invocation {
    /// `remat! { STMT* }`: expands to plain statements.
    Stmts(Vec<Stmt>),
    /// `remat!(POLICY REGION)`: expands to an expression, the region's output.
    Expr(Box<Region>),
}

/// One statement of a `remat! { }` block.
pub(crate) enum Stmt {
    Region(Box<RegionStmt>),
    Needs(NeedsStmt),
    Scope(ScopeStmt),
    /// Ordinary Rust, copied as written.
    Bare(Box<syn::Stmt>),
}

/// `[let PAT =] POLICY REGION ;`
pub(crate) struct RegionStmt {
    /// Attributes, kept on the generated `let`.
    pub attrs: Vec<Attribute>,
    /// The pattern of `let PAT =` (with its type, if one was written).
    pub pat: Option<Pat>,
    pub region: Region,
}

/// `POLICY [NAME ':'] CALL`, where POLICY is `save`, `recompute`, `auto` or
/// `region [EXPR]`.
pub(crate) struct Region {
    pub policy: Policy,
    /// `region [EXPR] ...`: the policy, a `remat::Policy` chosen at run time.
    pub policy_expr: Option<Box<Expr>>,
    pub name: Name,
    pub call: Call,
}

/// Which policy a region runs under, by its keyword.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PolicyKind {
    Save,
    Recompute,
    /// `region [EXPR]`: `Save` or `Recompute`, chosen when the region runs.
    Dynamic,
    /// `auto`: `::remat::Policy::Auto`, chosen by the active plan (without
    /// one, `Recompute`).
    Auto,
}

/// A region's policy keyword, where it was written.
#[derive(Clone, Copy)]
pub(crate) struct Policy {
    pub kind: PolicyKind,
    /// The keyword's span: generated runtime calls carry it, so that
    /// `#[track_caller]` records the user's line.
    pub span: Span,
}

impl Policy {
    /// The keyword as written, for messages.
    pub(crate) fn keyword(self) -> &'static str {
        match self.kind {
            PolicyKind::Save => "save",
            PolicyKind::Recompute => "recompute",
            PolicyKind::Dynamic => "region",
            PolicyKind::Auto => "auto",
        }
    }
}

/// The body of a region: one call or method call.
#[derive(Clone)]
pub(crate) enum Call {
    Fn(ExprCall),
    Method(ExprMethodCall),
}

impl Call {
    /// The call's arguments, the region's inputs.
    pub(crate) fn args(&self) -> impl ExactSizeIterator<Item = &Expr> {
        match self {
            Call::Fn(call) => call.args.iter(),
            Call::Method(call) => call.args.iter(),
        }
    }

    /// The call with its arguments replaced (by the locals that hold them).
    pub(crate) fn with_args(&self, args: impl IntoIterator<Item = Expr>) -> Expr {
        match self {
            Call::Fn(call) => {
                let mut call = call.clone();
                call.args = args.into_iter().collect();
                Expr::Call(call)
            }
            Call::Method(call) => {
                let mut call = call.clone();
                call.args = args.into_iter().collect();
                Expr::MethodCall(call)
            }
        }
    }
}

/// `needs NAME (, NAME)* ;`: each name rebound to its marked value.
pub(crate) struct NeedsStmt {
    /// Attributes, kept on each generated `let`.
    pub attrs: Vec<Attribute>,
    pub needs: Ident,
    pub names: Vec<Ident>,
}

/// `scope NAME { STMT* }`
pub(crate) struct ScopeStmt {
    pub scope: Ident,
    pub name: Name,
    pub stmts: Vec<Stmt>,
}
