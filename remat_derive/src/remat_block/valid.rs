//! What `remat!` refuses in a block that parsed: a region call with more
//! arguments than the runtime takes. The expansion goes ahead regardless
//! (rustc then reports the arity too), so this check only adds errors.

use syn::Expr;

use crate::errors::push_error;
use crate::remat_block::ast::{Invocation, Region, Stmt};

/// The most arguments a region call may take (the runtime implements its
/// inputs for tuples up to this arity).
const MAX_ARGS: usize = 12;

/// Every problem of the invocation, in the order the regions are written,
/// scopes' included.
pub(crate) fn check(invocation: &Invocation) -> Option<syn::Error> {
    let mut errors = None;
    match invocation {
        Invocation::Stmts(stmts) => check_stmts(stmts, &mut errors),
        Invocation::Expr(region) => check_region(region, &mut errors),
    }
    errors
}

/// The regions of `stmts`, scopes' included.
fn check_stmts(stmts: &[Stmt], errors: &mut Option<syn::Error>) {
    for stmt in stmts {
        match stmt {
            Stmt::Region(stmt) => check_region(&stmt.region, errors),
            Stmt::Scope(scope) => check_stmts(&scope.stmts, errors),
            Stmt::Needs(_) | Stmt::Bare(_) => {}
        }
    }
}

/// Too many arguments, reported at the first one too many.
fn check_region(region: &Region, errors: &mut Option<syn::Error>) {
    let args: Vec<&Expr> = region.call.args().collect();
    if args.len() > MAX_ARGS {
        push_error(
            errors,
            syn::Error::new_spanned(
                args[MAX_ARGS],
                format!(
                    "a region call takes at most {MAX_ARGS} arguments; group the \
                     others in a struct passed as `::remat::Opaque(...)`"
                ),
            ),
        );
    }
}
