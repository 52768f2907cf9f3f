//! The checkpoint mechanism: everything that runs a checkpoint's forward,
//! its regions, and its replay in backward.
//!
//! From the bottom up: `auto` (the decisions of the active plan),
//! `capacity` (how big the per-region tables start), `determinism`,
//! `early_stop` (where a recomputation may end: the stop rule),
//! `random_state` (the generators kept), `path` (what recomputation must do
//! again), `inputs` (the inputs' node), `holders` (the holders of one call
//! and their refill), `tensor_hooks` (a user's pair) and `recompute_start`
//! (the pairs told of recomputation), `checkpoint_state` (what one call
//! shares: one owner per protocol), `frame` (which checkpoint and phase a
//! thread runs), `saved_tensors` (where a user's pair applies), `holder`
//! (the forward's hook: saves become holders, whose unpack starts the
//! replay), `replay` (the replay), `save_region/` (everything of `Save`
//! regions), `name_scope` (prefixes of region names), `region` (and asking
//! checkpoints to keep what bare code reads), `needs`, `closure` (the bound
//! on a checkpoint's closure), `checkpoint_forward` (a call's forward) and
//! `checkpoint` (the public builder, its options resolved).

pub(crate) mod auto;
pub(crate) mod capacity;
pub(crate) mod checkpoint;
pub(crate) mod checkpoint_forward;
pub(crate) mod checkpoint_state;
pub(crate) mod closure;
pub(crate) mod determinism;
pub(crate) mod early_stop;
pub(crate) mod frame;
pub(crate) mod holder;
pub(crate) mod holders;
pub(crate) mod inputs;
pub(crate) mod name_scope;
pub(crate) mod needs;
pub(crate) mod path;
pub(crate) mod random_state;
pub(crate) mod recompute_start;
pub(crate) mod region;
pub(crate) mod replay;
pub(crate) mod save_region;
pub(crate) mod saved_tensors;
pub(crate) mod tensor_hooks;
