//! The checkpoint mechanism: everything that runs a checkpoint's forward,
//! its regions, and its replay in backward.
//!
//! From the bottom up: `auto` (the decisions of the active plan), `state` (what one checkpoint call shares, with
//! `record`, `persist` and `saved_input` as its parts, and `determinism`),
//! `frame` (which checkpoint and phase a thread runs), `holder` and `replay`
//! (the saved tensors autograd keeps, refilled by replaying), `nodes` (the
//! autograd nodes remat adds), `save_region` and `region`, and `checkpoint`
//! (the public builder and the forward).

pub(crate) mod auto;
pub(crate) mod checkpoint;
pub(crate) mod closure;
pub(crate) mod determinism;
pub(crate) mod frame;
pub(crate) mod holder;
pub(crate) mod nodes;
pub(crate) mod persist;
pub(crate) mod policy;
pub(crate) mod record;
pub(crate) mod region;
pub(crate) mod replay;
pub(crate) mod save_region;
pub(crate) mod saved_input;
pub(crate) mod state;
