//! The check's intermediate representation: a checkpoint body lowered to
//! the few things that matter for replay.
//!
//! Values are what `save` regions produce: one *site* per region in the
//! source, and each run of it a new instance. Places are locals with
//! projections (`h.t`, `v[i]`, `t.0`). Nodes are assignments of operands to
//! places, reads of operands by bare code, `needs` marks, structured
//! branches (joined), labelled blocks (joined with the breaks out of them) and
//! loops (iterated to a fixpoint). `lower` builds it
//! from syn's tree, `dataflow` runs the analysis over it.

use proc_macro2::TokenStream;

pub(crate) type LocalId = usize;
pub(crate) type SiteId = usize;
pub(crate) type ReadId = usize;

/// One projection of a place or a value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Proj {
    /// `.name` or `.0` (a tuple field: element 0 of a multi-tensor output).
    Field(String),
    /// `[i]`: `Some(i)` for a literal index, `None` for any other.
    Index(Option<u32>),
    /// The pieces of a split view (`chunk`, `split`, `unbind`), which share
    /// the storage of what was split: a mark of any piece keeps them all.
    Split,
}

/// What an expression's value may hold, built from places and fresh
/// outputs; evaluated by the analysis in the state where it is used.
#[derive(Clone, Debug)]
pub(crate) enum Operand {
    /// A local with projections.
    Place(LocalId, Vec<Proj>),
    /// The output of the `save` (or run-time policy) region `SiteId`, just run.
    Fresh(SiteId),
    /// A tuple or struct built in place: each part at its projection.
    Parts(Vec<(Proj, Operand)>),
    /// A struct built with update syntax (`S { t: a, ..base }`): `base`'s
    /// parts, but for the fields written, which are these.
    Update(Box<Operand>, Vec<(Proj, Operand)>),
    /// One of these, depending on the path taken.
    Union(Vec<Operand>),
    /// A projection of an operand.
    Proj(Box<Operand>, Proj),
    /// Nothing the check tracks (a computed tensor, a number...).
    Other,
    /// No value at all (`let a;`).
    Nothing,
    /// The result of calling a closure again: the instances of these sites
    /// in it are the ones this call just made.
    Refresh(Box<Operand>, Vec<SiteId>),
}

impl Operand {
    /// The part of this value at `proj`: a place's projections grow in
    /// place, so that the analysis looks up one place, not a projection of
    /// a place.
    pub(crate) fn project(self, proj: Proj) -> Operand {
        match self {
            Operand::Place(local, mut projs) => {
                projs.push(proj);
                Operand::Place(local, projs)
            }
            other => Operand::Proj(Box::new(other), proj),
        }
    }
}

/// Where a read happens, for the message.
#[derive(Clone, Debug)]
pub(crate) enum ReadKind {
    /// Bare code.
    Bare,
    /// The receiver or callee of a region that may recompute: captured by
    /// its body, not an input. The region's keyword and name.
    Callee { keyword: String, region: String },
}

#[derive(Clone, Debug)]
pub(crate) struct Read {
    pub id: ReadId,
    pub operand: Operand,
    /// The code read, for the error's span.
    pub at: TokenStream,
    /// The place as written (`attn`, `h.t`), if the read is of a place.
    pub var: Option<String>,
    /// The collection `var` is an element of, as written, when `var` is a
    /// `for` loop's variable (`parts` in `for t in &parts`): what a `needs`
    /// must mark, since an element at a run-time index is not one value.
    pub collection: Option<String>,
    /// The read is in code that runs on recomputation only (an arm of
    /// `if is_recomputing()`), where a `needs` has no effect.
    pub replay_only: bool,
    pub kind: ReadKind,
}

#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// A `save` region (or one whose policy is chosen at run time) runs: a
    /// new instance of its site's value, not marked.
    Def(SiteId),
    /// `place = operand`. Weak when the place goes through an index (the
    /// old contents may stay).
    Assign {
        local: LocalId,
        projs: Vec<Proj>,
        value: Operand,
        weak: bool,
    },
    /// A write through a reference whose target is somewhere under
    /// `local.projs` (`cache.get_mut(i)`, `for e in &mut v`): every place
    /// under it may now hold the value too (a weak write to all of them).
    Smear {
        local: LocalId,
        projs: Vec<Proj>,
        value: Operand,
    },
    Read(Read),
    /// `needs x;`: marks the value `x` denotes, if it denotes exactly one.
    Needs(Operand),
    /// Exclusive paths, joined after.
    Branch(Vec<Vec<Node>>),
    /// `if is_recomputing()`'s arms: `forward` runs on the forward only,
    /// `replay` on recomputation only. Joined after, except for marks,
    /// which are the forward's: `needs` asks on the forward.
    Phased {
        forward: Vec<Node>,
        replay: Vec<Node>,
    },
    /// A body run any number of times (zero included); `label` for `break`.
    Loop {
        label: Option<String>,
        body: Vec<Node>,
    },
    /// A labelled block (`'b: { .. }`): run once; the state after it joins
    /// its end and every `break 'b` out of it.
    Block {
        label: String,
        body: Vec<Node>,
    },
    /// Leaves the innermost loop, or the loop or block labelled.
    Break(Option<String>),
    /// Goes to the next iteration of the innermost loop, or the one labelled.
    Continue(Option<String>),
    /// Leaves the body (the rest of the path does not run).
    Return,
}

/// A `save` region in the source.
#[derive(Clone, Debug)]
pub(crate) struct Site {
    /// The region's name as shown (`attention`, `[format!(..)]`).
    pub region: String,
    /// `Some(text)` when the policy is chosen at run time (`region [EXPR]`).
    pub dynamic: Option<String>,
    /// An `auto` region: the active plan chooses its policy.
    pub auto: bool,
    /// The names first bound to the output and its elements, for messages:
    /// element path → name.
    pub names: Vec<(Vec<Proj>, String)>,
}

/// The lowered body.
#[derive(Default, Debug, Clone)]
pub(crate) struct Body {
    pub nodes: Vec<Node>,
    pub sites: Vec<Site>,
}
