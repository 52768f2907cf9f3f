//! The check's messages: every error it reports, in one place.

use proc_macro2::{Span, TokenStream};

use crate::check::ir::{Proj, ReadKind, Site};

/// How a site's region is named in a message.
fn region_desc(site: &Site) -> String {
    match &site.dynamic {
        None if site.auto => format!(
            "`auto` region `{}` (the active plan may make it `Save`)",
            site.region
        ),
        None => format!("`save` region `{}`", site.region),
        Some(policy) => format!(
            "region `{}` (its policy `[{policy}]` may be `Save`)",
            site.region
        ),
    }
}

/// The name bound to the value at `elems` (or the nearest enclosing one).
fn origin<'a>(site: &'a Site, elems: &[Proj]) -> Option<&'a str> {
    site.names
        .iter()
        .filter(|(path, _)| elems.starts_with(path))
        .max_by_key(|(path, _)| path.len())
        .map(|(_, name)| name.as_str())
}

/// A read by bare code (or a region's receiver) of an unmarked save output.
pub(crate) fn unmarked_read(
    at: &TokenStream,
    var: Option<&str>,
    kind: &ReadKind,
    site: &Site,
    elems: &[Proj],
) -> syn::Error {
    let region = region_desc(site);
    let Some(var) = var.or_else(|| origin(site, elems)) else {
        let name = &site.region;
        return syn::Error::new_spanned(
            at,
            format!(
                "this reads the output of {region} in place, but that region is skipped on \
                 replay; bind it (`let x = save {name}: ...;`), then add `needs x;` before \
                 reading it, or pass it to a region"
            ),
        );
    };
    let what = match origin(site, elems) {
        Some(origin) if origin != var => {
            format!("`{var}` is a view of `{origin}`, the output of {region}")
        }
        _ => format!("`{var}` holds the output of {region}"),
    };
    let message = match kind {
        ReadKind::Bare => format!(
            "{what}, which is skipped on replay; add `needs {var};` before this read, or \
             pass `{var}` to a region"
        ),
        ReadKind::Callee { keyword, region } => format!(
            "{what}, which is skipped on replay, and `{keyword}` region `{region}` reads it \
             through its receiver, which is not one of its inputs; add `needs {var};` before \
             this statement, or pass `{var}` as an argument"
        ),
    };
    syn::Error::new_spanned(at, message)
}

/// `needs x;` on an input or a `recompute` output.
pub(crate) fn needs_no_effect(at: &TokenStream, ident: &str, what: &str) -> syn::Error {
    syn::Error::new_spanned(
        at,
        format!(
            "`needs {ident};` has no effect: {what}; `needs` is for outputs of `save` regions \
             (and their views). Remove it"
        ),
    )
}

/// `needs x;` on a name that is no local of the checkpoint.
pub(crate) fn needs_unknown(at: &TokenStream, ident: &str, similar: Option<&str>) -> syn::Error {
    let hint = match similar {
        Some(name) => format!("; did you mean `{name}`?"),
        None => String::new(),
    };
    syn::Error::new_spanned(
        at,
        format!(
            "`{ident}` is not a local name in this checkpoint; `needs` takes a local that \
             holds the output of a `save` region (or a view of one){hint}"
        ),
    )
}

pub(crate) fn duplicate_name(span: Span, value: &str, place: &str) -> syn::Error {
    syn::Error::new(
        span,
        format!(
            "region name `{value}` is used twice in this {place}; region names must be unique \
             in a checkpoint: rename one of them, or compute the name at run time with \
             `[format!(...)]`"
        ),
    )
}

/// A `remat!` the check cannot see into (inside another macro).
pub(crate) fn hidden_remat(at: &TokenStream, mac: &str) -> syn::Error {
    syn::Error::new_spanned(
        at,
        format!(
            "the check cannot see the bindings of a `remat!` inside `{mac}!`: write the \
             `remat!` directly in the body, or put `#[remat(unchecked)]` on this statement \
             (reads the check cannot see fail on replay, or in strict replay)"
        ),
    )
}

pub(crate) fn too_deep(span: Span, limit: usize) -> syn::Error {
    syn::Error::new(
        span,
        format!(
            "this code is nested more than {limit} levels deep, more than the remat macros \
             check; split it into `let` bindings or helper functions"
        ),
    )
}

pub(crate) fn gave_up(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        "the remat check did not settle on this body's loops (a bug in remat; please report \
         it); put `#[remat(unchecked)]` on the loop to compile meanwhile",
    )
}
