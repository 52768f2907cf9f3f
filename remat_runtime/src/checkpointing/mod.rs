//! The checkpoint mechanism: everything that runs a checkpoint's forward,
//! its regions, and its replay in backward.
//!
//! From the bottom up: `auto` (the decisions of the active plan),
//! `capacity` (how big the per-region tables start), `checkpoint_state`
//! (what one checkpoint call shares, and the node its inputs are saved on)
//! with `determinism`, `frame` (which checkpoint and phase a thread runs),
//! `holder` (the saved tensors autograd keeps, and the replay that refills
//! them) with `early_stop` (where that replay may end), `save_region/`
//! (everything of `Save` regions), `saved_tensors` (where a user's hook
//! pair applies), `name_scope` (prefixes of region names), `region` (and
//! asking checkpoints to keep what bare code reads), `needs`, and
//! `checkpoint` (the public builder and the forward).

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
