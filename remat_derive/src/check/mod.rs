//! The compile-time check: bare code must not read a `save` region's output
//! unless it said so with `needs`.
//!
//! On replay a `save` region is skipped and its output is a placeholder
//! unless something asked the runtime to keep it. Region arguments ask
//! automatically; bare code can only ask with `needs x;`. As rustc's MIR
//! borrowck does, the check lowers the code to a small IR (`ir`, built by
//! `lower`, which resolves names in `scope`, takes places apart with
//! `place` and knows the methods and macros of `vocab`), runs a dataflow
//! analysis over it (`dataflow`, on the abstract state of `state`: which
//! places may hold an unmarked save output, on any path, through branches
//! and loops), and reports every read by bare code of such a value
//! (`report`). The verdicts that need no dataflow (duplicate region names,
//! `needs` that cannot have an effect) are `valid`'s, asked by the lowering
//! where it meets them. docs/dsl.md lists what the check tracks and what it
//! decides about the code it cannot see.

pub(crate) mod dataflow;
pub(crate) mod fix;
pub(crate) mod ir;
pub(crate) mod lower;
pub(crate) mod place;
pub(crate) mod report;
pub(crate) mod scope;
pub(crate) mod state;
pub(crate) mod valid;
pub(crate) mod vocab;

use std::rc::Rc;

use proc_macro2::Span;
use syn::Pat;

use crate::ast::{self, Mode};
use crate::check::lower::Lower;
use crate::preparsed::Table;

/// The checker. Feed it parameters and a body (or statements), then take
/// its errors.
pub(crate) struct Checker {
    lower: Lower,
}

impl Checker {
    pub(crate) fn new(mode: Mode) -> Self {
        Checker {
            lower: Lower::new(mode),
        }
    }

    /// Declares a parameter of the checkpoint function: a tensor parameter
    /// is an input, which replay reproduces.
    pub(crate) fn param(&mut self, pat: &Pat, tensor: bool) {
        self.lower.param(pat, tensor);
    }

    /// Checks the body of a `#[checkpoint]` function (its tail is returned),
    /// whose `remat!` invocations `preparsed` holds (see `crate::preparsed`).
    pub(crate) fn body(&mut self, block: &syn::Block, preparsed: Rc<Table>) {
        self.lower.set_preparsed(preparsed);
        self.lower.block_stmts(&block.stmts);
    }

    /// Checks the statements of a standalone `remat! { }` block.
    pub(crate) fn remat_stmts(&mut self, stmts: &[ast::Stmt]) {
        self.lower.remat_stmts(stmts, true);
    }

    /// The errors found, combined in source order.
    pub(crate) fn finish(self) -> Option<syn::Error> {
        let (body, mut errors) = self.lower.finish();
        let outcome = dataflow::analyze(&body);
        for finding in outcome.findings {
            let fix = fix::choose(&body, &finding);
            let error = report::unmarked_read(fix, &body.sites, &finding);
            errors.push((finding.read.id, error));
        }
        if outcome.gave_up {
            errors.push((usize::MAX, report::gave_up(Span::call_site())));
        }
        errors.sort_by_key(|(seq, _)| *seq);
        let mut combined: Option<syn::Error> = None;
        for (_, error) in errors {
            crate::errors::push_error(&mut combined, error);
        }
        combined
    }
}
