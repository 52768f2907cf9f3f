//! The names whose meaning the check knows without seeing their code: view
//! methods of `Tensor` (by libtorch's aliasing: only those that never copy,
//! for the arguments written) and metadata methods, constructors that only wrap a value,
//! the `std` macros that evaluate their arguments in place, compound
//! assignment, and `is_recomputing()`. docs/dsl.md states its rules in these
//! terms; any other call is one the check cannot see into, whose result is
//! computed (not a `save` output) and whose arguments it reads.

use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Token};

/// View methods of `Tensor` (docs/dsl.md, rule X2): the result shares the
/// receiver's storage for every argument they take, so it is a placeholder
/// exactly when the receiver is, and the runtime's keep (by storage) covers
/// it. Each is a view in libtorch's schema (`Tensor(a)`, or `Tensor(a)[]`
/// for the splits) whatever its arguments; tch's `shallow_clone` shares the
/// tensor itself. Not here, because they may copy: `reshape`, `flatten`,
/// `contiguous` (a copy unless already contiguous), `to`, the `*_copy`
/// variants (`view_copy`, `expand_copy`, `squeeze_copy`: always copies), the
/// in-place variants (`squeeze_`), and anything else: a call the check does
/// not know reads its receiver. `i` depends on its argument:
/// `is_view_index`.
fn is_view_method(name: &str) -> bool {
    matches!(
        name,
        "view"
            | "view_as"
            | "narrow"
            | "select"
            | "slice"
            | "transpose"
            | "tr"
            | "permute"
            | "unsqueeze"
            | "squeeze"
            | "squeeze_dim"
            | "squeeze_dims"
            | "expand"
            | "expand_as"
            | "chunk"
            | "split"
            | "unbind"
            | "shallow_clone"
            | "detach"
            | "alias"
    )
}

/// View methods whose result is a list of views of one storage.
pub(crate) fn is_split_view(method: &Ident) -> bool {
    matches!(method.to_string().as_str(), "chunk" | "split" | "unbind")
}

/// A view call: a view method, or `i` with an index that libtorch turns
/// into views only.
pub(crate) fn is_view(method: &Ident, args: &Punctuated<Expr, Token![,]>) -> bool {
    let name = method.to_string();
    if name == "i" {
        return args.len() == 1 && is_view_index(&args[0]);
    }
    is_view_method(&name)
}

/// An argument of tch's `i` that makes a view of the receiver: an integer
/// (`select`), a range or `..` (`narrow`/`slice`), `NewAxis` (`unsqueeze`),
/// or a tuple of those. A tensor index is `index_select`, a copy; and any
/// other expression (a variable, a call) may be one: not a view.
fn is_view_index(index: &Expr) -> bool {
    match index {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(_),
            ..
        }) => true,
        Expr::Unary(e) if matches!(e.op, syn::UnOp::Neg(_)) => is_view_index(&e.expr),
        // A cast to an integer type is an integer.
        Expr::Cast(e) => matches!(&*e.ty, syn::Type::Path(p)
        if p.path.get_ident().is_some_and(|t| matches!(
            t.to_string().as_str(),
            "i64" | "i32" | "i16" | "i8" | "isize" | "u32" | "u16" | "u8" | "usize"
        ))),
        // Ranges of tch's `i` are ranges of integers, whatever their bounds.
        Expr::Range(_) => true,
        Expr::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "NewAxis"),
        Expr::Paren(e) => is_view_index(&e.expr),
        Expr::Group(e) => is_view_index(&e.expr),
        Expr::Tuple(t) => t.elems.iter().all(is_view_index),
        _ => false,
    }
}

/// Metadata reads, which work on a placeholder (docs/dsl.md, rule X3).
pub(crate) fn is_metadata(method: &Ident) -> bool {
    let name = method.to_string();
    let sized = name
        .strip_prefix("size")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit()));
    sized
        || matches!(
            name.as_str(),
            "dim" | "kind" | "device" | "numel" | "requires_grad" | "is_contiguous" | "stride"
        )
}

/// `x.iter()` and `x.into_iter()`: a loop over them sees `x`'s elements.
pub(crate) fn is_iteration(method: &Ident) -> bool {
    method == "iter" || method == "into_iter"
}

/// One-element tuple-struct patterns that bind the whole value they match
/// (`Some(x)` binds the output held in the `Option`).
pub(crate) fn is_wrapping_pattern(variant: &str) -> bool {
    matches!(variant, "Some" | "Ok" | "Err" | "Box")
}

/// One-argument calls whose value is their argument, wrapped.
pub(crate) fn is_wrapping_call(constructor: &str) -> bool {
    matches!(constructor, "Some" | "Ok" | "Err")
}

/// A call of this name builds a tuple struct or enum variant (`Pair(a, b)`,
/// `P(a, b)`): by Rust's naming convention, a name in upper camel case
/// (`SCREAMING_CASE`, a static's, is not one). A function named so (rustc
/// warns about it) would be taken for one, and its arguments not read
/// (dsl.md L8).
pub(crate) fn is_constructor(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && (name.chars().any(|c| c.is_ascii_lowercase()) || name.len() <= 2)
}

/// Macros of `std` whose arguments are expressions evaluated in place.
pub(crate) fn is_std_macro(name: &str) -> bool {
    matches!(
        name,
        "println"
            | "print"
            | "eprintln"
            | "eprint"
            | "format"
            | "format_args"
            | "write"
            | "writeln"
            | "panic"
            | "assert"
            | "assert_eq"
            | "assert_ne"
            | "debug_assert"
            | "debug_assert_eq"
            | "debug_assert_ne"
            | "dbg"
            | "vec"
            | "todo"
            | "unimplemented"
            | "unreachable"
    )
}

/// `x += y` and the like: `x` is read, then holds a computed value.
pub(crate) fn is_compound(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// Which runs a branch is taken on, when its condition says so.
#[derive(PartialEq, Eq)]
pub(crate) enum Guard {
    /// `if !is_recomputing() { .. }`: skipped on replay, so nothing in it
    /// reads a placeholder; a `needs` in it runs on the forward, where it
    /// asks the runtime to keep the value.
    ForwardOnly,
    /// `if is_recomputing() { .. }`: only on replay, where a `needs` has
    /// no effect; its `else` is forward only.
    ReplayOnly,
}

/// The guard an `if` condition is, if it is `is_recomputing()` or its
/// negation.
pub(crate) fn recomputing_guard(cond: &Expr) -> Option<Guard> {
    match cond {
        Expr::Paren(e) => recomputing_guard(&e.expr),
        Expr::Group(e) => recomputing_guard(&e.expr),
        Expr::Unary(e) if matches!(e.op, syn::UnOp::Not(_)) => {
            is_recomputing_call(&e.expr).then_some(Guard::ForwardOnly)
        }
        _ => is_recomputing_call(cond).then_some(Guard::ReplayOnly),
    }
}

/// `is_recomputing()`, by any path.
fn is_recomputing_call(expr: &Expr) -> bool {
    match expr {
        Expr::Paren(e) => is_recomputing_call(&e.expr),
        Expr::Call(call) => {
            call.args.is_empty()
                && matches!(&*call.func, Expr::Path(p)
                    if p.path.segments.last().is_some_and(|s| s.ident == "is_recomputing"))
        }
        _ => false,
    }
}
