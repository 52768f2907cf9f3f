//! The model of `remat!`'s syntax: invocations, statements and regions as
//! `parse` builds them and `check` and `expand` read them, and `Mode`, which
//! macro the code comes from (both the check and the generation depend on
//! it). Nothing here parses; the types only hold what the user wrote, with
//! spans.

use std::cell::Cell;

use proc_macro2::{Delimiter, Spacing, Span, TokenStream};
use syn::{Attribute, Expr, ExprCall, ExprMethodCall, Ident, Macro, Pat};

/// Which macro the code comes from. A `#[checkpoint]` body is all the code
/// replay runs; a standalone `remat! { }` block is a part of it whose
/// surroundings the check does not see, so its tail and `return` value are
/// reads, and a name it does not declare may be a local from outside.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The whole body of a `#[checkpoint]` function.
    Checkpoint,
    /// One standalone `remat! { }` block.
    Block,
}

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
    /// Ordinary Rust, copied as written (its `#[remat]` attributes are
    /// validated by the check and stripped on expansion).
    Bare(Box<syn::Stmt>),
    /// `let PAT = save;` (or `recompute`): a region missing its call, or
    /// ordinary Rust if a local of that name exists, which the check decides.
    MissingCall(Box<MissingCall>),
}

/// `let PAT = save;`, as written.
pub(crate) struct MissingCall {
    pub local: syn::Local,
    /// `save` or `recompute`.
    pub keyword: Ident,
    /// Set by the check when no local has the keyword's name: the statement
    /// is then our error, and the expansion binds `PAT` to the error alone
    /// (rustc would add E0425 for the keyword, and more for each use of
    /// `PAT`).
    pub refused: Cell<bool>,
}

/// `[let PAT =] POLICY REGION ;`
pub(crate) struct RegionStmt {
    /// Attributes other than `#[remat(...)]`, kept on the generated `let`.
    pub attrs: Vec<Attribute>,
    pub unchecked: bool,
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

#[derive(Clone, Copy)]
pub(crate) struct Policy {
    pub kind: PolicyKind,
    /// The keyword's span: generated runtime calls carry it, so that
    /// `#[track_caller]` records the user's line.
    pub span: Span,
}

impl Policy {
    pub(crate) fn keyword(self) -> &'static str {
        match self.kind {
            PolicyKind::Save => "save",
            PolicyKind::Recompute => "recompute",
            PolicyKind::Dynamic => "region",
            PolicyKind::Auto => "auto",
        }
    }
}

/// A region or scope name, after defaulting.
#[derive(Clone)]
pub(crate) enum Name {
    /// Known at compile time: an identifier, a string literal or the callee.
    Static { value: String, span: Span },
    /// `[expr]`, evaluated at run time (e.g. a `format!`).
    Dynamic(Box<Expr>),
}

/// Code as text for error messages, spaced the way people write it
/// (`self.layers[0].forward(&x)`, not `self.layers [0].forward(& x)`).
pub(crate) fn compact(tokens: &TokenStream) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum Prev {
        Start,
        Word,
        Space,
        Glued,
    }
    fn write(tokens: &TokenStream, out: &mut String) {
        use proc_macro2::TokenTree;
        let mut prev = Prev::Start;
        for tt in tokens.clone() {
            match &tt {
                TokenTree::Ident(_) | TokenTree::Literal(_) => {
                    if prev == Prev::Word {
                        out.push(' ');
                    }
                    out.push_str(&tt.to_string());
                    prev = Prev::Word;
                }
                TokenTree::Group(g) => {
                    let (open, close) = match g.delimiter() {
                        Delimiter::Parenthesis => ("(", ")"),
                        Delimiter::Bracket => ("[", "]"),
                        Delimiter::Brace => ("{ ", " }"),
                        Delimiter::None => ("", ""),
                    };
                    if prev == Prev::Word && g.delimiter() == Delimiter::Brace {
                        out.push(' ');
                    }
                    out.push_str(open);
                    write(&g.stream(), out);
                    out.push_str(close);
                    prev = Prev::Word;
                }
                TokenTree::Punct(p) => {
                    let c = p.as_char();
                    let binary = prev == Prev::Word && "=+-*/%<>|^&".contains(c);
                    if binary {
                        out.push(' ');
                    }
                    out.push(c);
                    prev = match (c, p.spacing()) {
                        (_, Spacing::Joint) => Prev::Glued,
                        (',' | ';', _) => Prev::Space,
                        _ if binary || prev == Prev::Glued && "=+-*/%<>|^&".contains(c) => {
                            Prev::Space
                        }
                        _ => Prev::Glued,
                    };
                    if prev == Prev::Space {
                        out.push(' ');
                    }
                }
            }
        }
    }
    let mut out = String::new();
    write(tokens, &mut out);
    out
}

impl Name {
    /// How the name is shown in error messages.
    pub(crate) fn display(&self) -> String {
        match self {
            Name::Static { value, .. } => value.clone(),
            Name::Dynamic(expr) => {
                format!("[{}]", compact(&quote::ToTokens::to_token_stream(expr)))
            }
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

/// `needs EXPR (, EXPR)* ;`
pub(crate) struct NeedsStmt {
    pub needs: Ident,
    pub exprs: Vec<Expr>,
    /// Per expression, set by the check when it reported the name as no
    /// local: the expansion drops that expression's call, so that rustc
    /// does not report the name a second time (E0425).
    pub dropped: Vec<Cell<bool>>,
}

/// `scope NAME { STMT* }`
pub(crate) struct ScopeStmt {
    pub unchecked: bool,
    pub scope: Ident,
    pub name: Name,
    pub stmts: Vec<Stmt>,
}

/// Whether a macro invocation is `remat!` (by its last path segment, so that
/// `remat::remat!` and `::remat::remat!` count too).
pub(crate) fn is_remat(mac: &Macro) -> bool {
    mac.path.segments.last().is_some_and(|s| s.ident == "remat")
}
