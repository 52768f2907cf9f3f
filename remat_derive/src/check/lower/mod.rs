//! Lowering: syn's tree of a checkpoint body (and `remat!`'s statements) to
//! the check's IR, which `dataflow` then analyses, as rustc builds MIR for
//! borrowck to run on.
//!
//! Expressions are lowered to the operand their value may carry (a place, a
//! view of one, a fresh `save` output, a tuple or array of those, one of
//! several after a branch) and to the reads they perform on the way: every
//! use that is not one of the allowed forms of docs/dsl.md (rule X3) is a read. By what
//! they lower: `stmt` (statements, `remat!` statements, `let`), `cfg`
//! (statements under `#[cfg]`), `pat`
//! (bindings), `region` (regions and their arguments), `expr`
//! (expressions, assignments), `refs` (writes through `&mut`), `control` (blocks, branches, loops,
//! closures, `return`) and `macros` (macro invocations, by their tokens).
//! Statements and expressions lower each other, as Rust's blocks are
//! expressions: the parts call each other's methods on `Lower` and import
//! only this module.
//!
//! Invariants: every read and every error takes the next number of one
//! sequence (`seq`), so that `Checker::finish` reports the dataflow's
//! errors and the lowering's in source order; `out` is never empty (each
//! `nodes` pushes a list and pops it), so every node emitted has a place;
//! the counters (`loops`, `unchecked`, `replay_only`) come back to where
//! they were after each construct that raised them.

mod cfg;
mod control;
mod expr;
mod macros;
mod pat;
mod refs;
mod region;
mod stmt;

use std::collections::HashMap;
use std::rc::Rc;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::Expr;

use crate::ast::Mode;
use crate::check::ir::{Body, LocalId, Node, Operand, Read, ReadKind, Site, SiteId};
use crate::check::place::place_text;
use crate::check::scope::{Kind, Scopes};
use crate::check::valid::RegionNames;
use crate::preparsed::Table;

/// A closure being lowered: where its `return` goes.
struct Closure {
    /// The label of the loop its body is lowered as.
    label: String,
    /// The local that holds its results.
    result: LocalId,
}

/// What a `break` may leave: a loop or a labelled block, whose value (for
/// `loop` and a block) a `break` with a value assigns; or a closure, which
/// no `break` leaves.
struct Target {
    label: Option<String>,
    kind: TargetKind,
    /// The local that holds the construct's value.
    result: Option<LocalId>,
}

#[derive(PartialEq, Eq)]
enum TargetKind {
    Loop,
    Block,
    Closure,
}

pub(crate) struct Lower {
    mode: Mode,
    /// The node lists being built, innermost last.
    out: Vec<Vec<Node>>,
    scopes: Scopes,
    sites: Vec<Site>,
    /// Sites created inside each closure being lowered.
    collect: Vec<Vec<SiteId>>,
    /// Locals bound to a closure: the sites its body runs.
    closure_sites: HashMap<LocalId, Vec<SiteId>>,
    closures: Vec<Closure>,
    closure_count: usize,
    /// The loops, labelled blocks and closures around the code, innermost
    /// last.
    targets: Vec<Target>,
    /// Locals bound to a mutable reference: what they point to.
    refs: HashMap<LocalId, refs::Referent>,
    /// A name after a `#[cfg]`'d `let`: the locals it may be (the `let`'s,
    /// or the one it would have shadowed), which its writes may reach.
    alternates: HashMap<LocalId, Vec<LocalId>>,
    seq: usize,
    errors: Vec<(usize, syn::Error)>,
    region_names: RegionNames,
    /// The region names that `#[cfg]`'d statements used, which another
    /// `#[cfg]`'d statement may use again (only one may be compiled in).
    cfg_names: RegionNames,
    loops: usize,
    /// Depth of `#[remat(unchecked)]` statements and forward-only code.
    unchecked: usize,
    /// Depth of code that runs on recomputation only, where `needs` has no
    /// effect and is not counted.
    replay_only: usize,
    /// Locals bound to each element of a collection by a `for` loop: the
    /// collection as written, for messages.
    elements_of: HashMap<LocalId, String>,
    /// `macro_rules!` defined in the body: name → definition.
    macros: HashMap<String, TokenStream>,
    /// A macro in statement position that may bind names the check
    /// cannot see.
    opaque_macro: bool,
    depth: usize,
    too_deep: bool,
    /// The body's `remat!` invocations, shared with the expansion.
    preparsed: Rc<Table>,
}

impl Lower {
    pub(crate) fn new(mode: Mode) -> Self {
        Lower {
            mode,
            out: vec![Vec::new()],
            scopes: Scopes::default(),
            sites: Vec::new(),
            collect: Vec::new(),
            closure_sites: HashMap::new(),
            closures: Vec::new(),
            closure_count: 0,
            targets: Vec::new(),
            refs: HashMap::new(),
            alternates: HashMap::new(),
            seq: 0,
            errors: Vec::new(),
            region_names: RegionNames::default(),
            cfg_names: RegionNames::default(),
            loops: 0,
            unchecked: 0,
            replay_only: 0,
            elements_of: HashMap::new(),
            macros: HashMap::new(),
            opaque_macro: false,
            depth: 0,
            too_deep: false,
            preparsed: Rc::default(),
        }
    }

    /// Reads the body's `remat!` invocations from `preparsed` (see
    /// `crate::preparsed`), so that the check's decisions reach the expansion.
    pub(crate) fn set_preparsed(&mut self, preparsed: Rc<Table>) {
        self.preparsed = preparsed;
    }

    /// The lowered body and the errors found while lowering, each with its
    /// position among the reads (to report everything in source order).
    pub(crate) fn finish(mut self) -> (Body, Vec<(usize, syn::Error)>) {
        let nodes = self.out.pop().unwrap_or_default();
        let body = Body {
            nodes,
            sites: self.sites,
        };
        (body, self.errors)
    }

    fn error(&mut self, error: syn::Error) {
        self.seq += 1;
        self.errors.push((self.seq, error));
    }

    fn emit(&mut self, node: Node) {
        if let Some(out) = self.out.last_mut() {
            out.push(node);
        }
    }

    /// The nodes `f` emits, apart, for the caller to place (in a branch, a
    /// loop).
    fn nodes(&mut self, f: impl FnOnce(&mut Self)) -> Vec<Node> {
        self.out.push(Vec::new());
        f(self);
        self.out.pop().unwrap_or_default()
    }

    fn read(&mut self, operand: Operand, at: TokenStream, var: Option<String>, kind: ReadKind) {
        if self.unchecked > 0 {
            return;
        }
        self.seq += 1;
        let id = self.seq;
        let collection = var.as_deref().and_then(|var| {
            let root = var.split(['.', '[']).next()?;
            self.elements_of.get(&self.scopes.resolve(root)?).cloned()
        });
        self.emit(Node::Read(Read {
            id,
            operand,
            at,
            var,
            collection,
            replay_only: self.replay_only > 0,
            kind,
        }));
    }

    /// `expr` is used by bare code.
    fn read_expr(&mut self, expr: &Expr) {
        let op = self.value(expr);
        if matches!(op, Operand::Other | Operand::Nothing) {
            return;
        }
        let var = place_text(expr);
        self.read(op, expr.to_token_stream(), var, ReadKind::Bare);
    }

    /// A local for an intermediate value (a branch's, a block's).
    fn temp(&mut self) -> LocalId {
        self.scopes.new_local(Kind::Plain)
    }

    fn assign_temp(&mut self, temp: LocalId, op: Operand, weak: bool) {
        self.emit(Node::Assign {
            local: temp,
            projs: Vec::new(),
            value: op,
            weak,
        });
    }
}
