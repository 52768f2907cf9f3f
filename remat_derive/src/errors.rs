//! Errors are collected, not thrown: every check and parse step adds to one
//! `syn::Error` so that the user sees all problems of a macro at once.

/// Adds `error` to the errors found so far.
pub(crate) fn push_error(errors: &mut Option<syn::Error>, error: syn::Error) {
    match errors {
        Some(errors) => errors.combine(error),
        None => *errors = Some(error),
    }
}
