//! Errors are collected, not thrown: every check and parse step adds to one
//! `syn::Error` so that the user sees all problems of a macro at once.

/// Adds `error` to the errors found so far.
pub(crate) fn push_error(errors: &mut Option<syn::Error>, error: syn::Error) {
    match errors {
        Some(errors) => errors.combine(error),
        None => *errors = Some(error),
    }
}

/// Where input ends: the last token (a group's closing delimiter), or the
/// whole invocation when there is none.
pub(crate) fn end_span(tokens: &proc_macro2::TokenStream) -> proc_macro2::Span {
    match tokens.clone().into_iter().last() {
        Some(proc_macro2::TokenTree::Group(group)) => group.span_close(),
        Some(token) => token.span(),
        None => proc_macro2::Span::call_site(),
    }
}

/// Runs `parser` on `tokens` as `syn::parse2` does, except that "unexpected
/// end of input" points at the input's last token (`end_span`), not at the
/// whole invocation (e.g. `=` in `#[checkpoint(name =)]`).
pub(crate) fn parse_to_end<P: syn::parse::Parser>(
    parser: P,
    tokens: proc_macro2::TokenStream,
) -> syn::Result<P::Output> {
    // `__parse_scoped` is what syn's own `parse_macro_input!` calls to set
    // the span of end-of-input errors; `parse2` uses the call site.
    let scope = end_span(&tokens);
    parser.__parse_scoped(scope, tokens)
}
