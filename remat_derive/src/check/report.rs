//! The check's messages: every error it reports, in one place.

use proc_macro2::{Span, TokenStream};

use crate::check::dataflow::Finding;
use crate::check::fix::Fix;
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
    // A tuple pattern binds `.0`, which the analysis calls element `[0]`.
    let norm = |path: &[Proj]| -> Vec<Proj> {
        path.iter()
            .map(|p| match p {
                Proj::Field(f) => f.parse().map_or(p.clone(), |i| Proj::Index(Some(i))),
                other => other.clone(),
            })
            .collect()
    };
    let elems = norm(elems);
    site.names
        .iter()
        .filter(|(path, _)| elems.starts_with(&norm(path)))
        .max_by_key(|(path, _)| path.len())
        .map(|(_, name)| name.as_str())
}

/// A read by bare code (or a region's receiver) of an unmarked save output.
pub(crate) fn unmarked_read(fix: Fix, all_sites: &[Site], finding: &Finding) -> syn::Error {
    let read = &finding.read;
    let (at, var, collection) = (&read.at, read.var.as_deref(), read.collection.as_deref());
    let (replay_only, kind) = (read.replay_only, &read.kind);
    let (site, elems) = (&all_sites[finding.site], finding.elems.as_slice());
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
    // docs/dsl.md, rule X4: a mark of one element at a run-time index marks
    // nothing, so the fix marks the whole collection.
    let whole = whole_collection(var, collection, site, elems);
    let what = match (origin(site, elems), &whole) {
        (_, Some(whole)) if whole != var => {
            format!("`{var}` is an element of `{whole}`, the output of {region}")
        }
        (Some(origin), _) if origin != var => {
            format!("`{var}` is a view of `{origin}`, the output of {region}")
        }
        _ => format!("`{var}` holds the output of {region}"),
    };
    // A place read at a run-time index is marked whole (`needs parts;`
    // for `parts[i]`); anything else as itself (a loop's `t` too):
    // `check::fix` tries the same.
    let (mark, why) = match runtime_index_base(var) {
        Some(base) => (
            base,
            " (every element: a `needs` of one element at a run-time index marks none)",
        ),
        None => (var.to_string(), ""),
    };
    // The fix was tried (`check::fix`): only one that satisfies the check
    // is offered.
    let (read, alternative) = match kind {
        ReadKind::Bare => ("this read", format!("pass `{var}` to a region")),
        ReadKind::Callee { .. } => ("this statement", format!("pass `{var}` as an argument")),
    };
    let fix = match fix {
        Fix::BeforeRead => format!("add `needs {mark};` before {read}{why}, or {alternative}"),
        Fix::AfterRegions(sites) => {
            let at = if replay_only {
                "this read runs on recomputation only, where `needs` has no effect"
            } else {
                "a `needs` here would not cover every path to this read"
            };
            let marks: Vec<String> = sites
                .iter()
                .enumerate()
                .map(|(i, (site, elems))| {
                    let cut = elems
                        .iter()
                        .take_while(|p| **p != Proj::Index(None))
                        .count();
                    let name = origin(&all_sites[*site], &elems[..cut]).unwrap_or(var);
                    let which = if i == 0 { "the statement" } else { "that" };
                    format!(
                        "`needs {name};` right after {which} of region `{}`",
                        all_sites[*site].region
                    )
                })
                .collect();
            format!("add {} ({at}), or {alternative}", marks.join(", "))
        }
        Fix::None => format!(
            "no one `needs` covers every path to {read}: {alternative}, or mark the value on \
             each path that reaches it"
        ),
    };
    let message = match kind {
        ReadKind::Bare => format!("{what}, which is skipped on replay; {fix}"),
        ReadKind::Callee { keyword, region } => format!(
            "{what}, which is skipped on replay, and `{keyword}` region `{region}` reads it \
             through its receiver, which is not one of its inputs; {fix}"
        ),
    };
    syn::Error::new_spanned(at, message)
}

/// What `needs` must name when the read is of an element at a run-time
/// index (`parts[i]`, a `for` loop's `t`): the collection, as written.
/// `None` when the read names one element (or a piece of a split view,
/// which a mark of any piece keeps whole).
fn whole_collection(
    var: &str,
    collection: Option<&str>,
    site: &Site,
    elems: &[Proj],
) -> Option<String> {
    let at = elems.iter().position(|p| *p == Proj::Index(None))?;
    if elems[..at].contains(&Proj::Split) {
        return None;
    }
    if let Some(collection) = collection {
        return Some(collection.to_string());
    }
    if let Some(base) = runtime_index_base(var) {
        return Some(base);
    }
    origin(site, &elems[..at]).map(str::to_string)
}

/// `parts[i]`, `s.parts[k].t`: the place up to its first index that is not
/// a literal.
fn runtime_index_base(var: &str) -> Option<String> {
    let mut depth = 0;
    for (i, c) in var.char_indices() {
        match c {
            '[' if depth == 0 => {
                let close = var[i..].find(']')? + i;
                if var[i + 1..close].parse::<u32>().is_err() {
                    return Some(var[..i].to_string());
                }
                depth += 1;
            }
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
    }
    None
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
