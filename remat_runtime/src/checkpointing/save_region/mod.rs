//! `Save` regions, in one place: what the forward records (`record`) and
//! the records of one checkpoint call, by name and in order (`records`), the
//! pack hooks that keep the body's saves (`pack`), which saves are inputs
//! rebuilt instead of kept (`saved_input`), the output index and who asks
//! for an output to be kept (`keep`), the forward (`forward`), what a
//! skipped region serves on recomputation (`serve`), the body run again on
//! recomputation for a closure that computes gradients itself (`rerun`), and
//! where an `Offload` region's keeps go (`offload`).

pub(crate) mod forward;
pub(crate) mod keep;
pub(crate) mod offload;
pub(crate) mod pack;
pub(crate) mod record;
pub(crate) mod records;
pub(crate) mod rerun;
pub(crate) mod saved_input;
pub(crate) mod serve;
