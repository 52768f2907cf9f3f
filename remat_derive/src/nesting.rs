//! The nesting limit: the macros refuse, before parsing, input whose
//! delimiters nest deeper than `MAX_GROUP_DEPTH`. syn's parser and the
//! check recurse over nested code; rustc itself grows its stack, a proc
//! macro cannot, so without the limit a deep enough expression would crash
//! the compiler. The scan here is iterative.

use proc_macro2::{Span, TokenStream, TokenTree};

/// The deepest nesting of `()`, `[]` and `{}` the macros accept.
pub(crate) const MAX_GROUP_DEPTH: usize = 128;

/// An error at the first group nested deeper than the limit, if any.
pub(crate) fn check(tokens: &TokenStream) -> Option<syn::Error> {
    let mut stack: Vec<proc_macro2::token_stream::IntoIter> = vec![tokens.clone().into_iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(TokenTree::Group(group)) => {
                if stack.len() > MAX_GROUP_DEPTH {
                    return Some(error(group.span()));
                }
                stack.push(group.stream().into_iter());
            }
            Some(_) => {}
            None => {
                stack.pop();
            }
        }
    }
    None
}

fn error(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        format!(
            "this code nests delimiters more than {MAX_GROUP_DEPTH} levels deep, deeper than \
             the remat macros parse and check; split it into `let` bindings or helper \
             functions"
        ),
    )
}
