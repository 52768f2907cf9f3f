//! The check's verdicts that need no dataflow: a static region name used
//! twice on one path, and `needs` of a name that cannot hold a `save`
//! output (a checkpoint input, a `recompute` output, no local at all). The
//! lowering asks where it meets the code, since both depend on its scopes
//! and paths; the messages are `report`'s.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};

use crate::ast::Mode;
use crate::check::report;
use crate::check::scope::Kind;

/// The static region names used on the current path. Only one arm of a
/// branch runs, so the arms are separate paths (the same name in both arms
/// of an `if` is fine), joined after it.
#[derive(Clone, Default)]
pub(crate) struct RegionNames {
    seen: HashSet<String>,
}

impl RegionNames {
    /// Notes a region named `value`; an error if the path used the name
    /// already.
    pub(crate) fn note(&mut self, value: &str, span: Span, mode: Mode) -> Option<syn::Error> {
        if self.seen.contains(value) {
            let place = match mode {
                Mode::Checkpoint => "checkpoint",
                Mode::Block => "`remat!` block",
            };
            return Some(report::duplicate_name(span, value, place));
        }
        self.seen.insert(value.to_owned());
        None
    }

    /// Adds the names of another path: after a branch, either may have run.
    pub(crate) fn join(&mut self, other: RegionNames) {
        self.seen.extend(other.seen);
    }

    /// These names, less `other`'s.
    pub(crate) fn without(&self, other: &RegionNames) -> RegionNames {
        RegionNames {
            seen: self.seen.difference(&other.seen).cloned().collect(),
        }
    }
}

/// What `needs NAME;` does, for a plain name.
pub(crate) enum Needs {
    /// It marks what the name holds (nothing, if it holds no `save` output).
    Marks,
    /// It cannot have an effect: an error, and no mark.
    NoEffect(syn::Error),
    /// No local has the name: an error, and the expansion drops the `needs`
    /// so that rustc does not report the name again (E0425).
    Unknown(syn::Error),
}

/// The verdict on `needs NAME;`, where `kind` is what the local of that
/// name holds (`None`: no local has it) and `similar` suggests another.
pub(crate) fn needs(
    at: &TokenStream,
    name: &str,
    kind: Option<&Kind>,
    mode: Mode,
    opaque_macro: bool,
    similar: impl FnOnce() -> Option<String>,
) -> Needs {
    match kind {
        Some(Kind::Input) => {
            let what =
                format!("`{name}` is an input of the checkpoint, which replay gets back as it was");
            Needs::NoEffect(report::needs_no_effect(at, name, &what))
        }
        Some(Kind::Recomputed(region)) => {
            let what = format!(
                "`{name}` holds the output of `recompute` region `{region}`, which replay recomputes"
            );
            Needs::NoEffect(report::needs_no_effect(at, name, &what))
        }
        Some(Kind::Plain) => Needs::Marks,
        // Unknown for sure only in a whole checkpoint body: a standalone
        // block's names may be the enclosing function's, and a macro
        // statement may have bound it.
        None if mode == Mode::Checkpoint && !opaque_macro && name != "self" => {
            Needs::Unknown(report::needs_unknown(at, name, similar().as_deref()))
        }
        None => Needs::Marks,
    }
}
