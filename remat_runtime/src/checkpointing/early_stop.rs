//! Early stop: a recomputation stops computing as soon as it has rebuilt
//! everything the backward can still unpack, so the work after its last
//! save is not repeated. On by default: the stop unwinds nothing.
//!
//! How the stop travels: while a recomputation that may stop runs its last
//! ops, every ATen op on its thread passes through the bridge's stop
//! fallback (`bridge::StopArmed`, csrc/early_stop.cpp); "last" counts from
//! the save before the first one the stopping op can make, which the
//! forward measured as the most saves one autograd node made
//! (`Holders::arm_at`). The replay's pack hook fills
//! the holder of the save that completes the rebuild and then, when that
//! save is large enough to be worth it ([`ENDS_OP_FROM`]), fails it with
//! [`STOP`]; libtorch raises it out of the op's autograd kernel and the
//! fallback, one C++ frame above, catches it and returns placeholders with
//! the op's metadata: the op never computes. A smaller op computes, and the
//! fallback makes its results placeholders when it returns. From then on
//! the recomputation is *dry*: an op with a placeholder among its inputs
//! computes nothing either, every other op runs as usual, and the closure
//! runs on to its end and returns normally, its Rust code untouched (a lock
//! it takes is released by its guard as on any run; nothing is poisoned; a
//! `panic = "abort"` build stops as well). A skipped `Save` region whose
//! rebuilt saves complete the rebuild, or one reached after the stop,
//! returns placeholders. A save completed outside any op (one the runtime
//! makes itself) is kept and the recomputation goes dry from the next op.
//!
//! Invariant: once `stopped` is set for a replay, no later save of that
//! replay fills a holder (`Holders::fill_next` drops them), and the path is
//! no longer checked.
//!
//! docs/semantics.md rules kept here: C17 (when a replay stops, and what
//! runs dry), C18 (the switches and their precedence), C19 (what the tail
//! still does).

use crate::bridge;
use crate::error::Result;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;
use tch::Tensor;

/// The message of the pack hook's failure that stops a replay inside the
/// op saving the last tensor; the bridge catches it before any Rust code
/// sees it.
pub(crate) const STOP: &str =
    "remat: recomputation stopped early, every saved tensor is rebuilt (not an error)";

/// Whether this process can stop a recomputation early: the bridge's stop
/// fallback is registered (it is, unless another library took its key).
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(bridge::stop_available)
}

/// Arms the stop for a recomputation of checkpoint `name`, its fallback
/// active from the start or only once `Holders` says so: `None` when early
/// stop does not apply to it or the process cannot stop.
pub(crate) fn arm(on: bool, name: &str, active: bool) -> Option<bridge::StopArmed> {
    if !on {
        return None;
    }
    bridge::StopArmed::arm(&read_message(name), &no_meta_message(name), active)
}

/// Whether the save that completes a rebuild ends the op making it: only
/// when that op is worth more than ending it costs. Ending it raises a C++
/// exception out of the op, whose unwinding through libtorch's frames cost
/// tens of microseconds on the development machine (docs/performance.md,
/// section 7), about what an op on a tensor of this many elements takes;
/// a smaller op computes, and its results are dry from then on (rule C17).
pub(crate) const ENDS_OP_FROM: i64 = 1 << 16;

/// Whether saving `tensor` as the last thing backward needs ends its op.
pub(crate) fn ends_its_op(tensor: &Tensor) -> bool {
    tensor.numel() as i64 >= ENDS_OP_FROM
}

/// A checkpoint's inputs as its closure sees them: placeholders when it is
/// called in the tail of a recomputation that stopped (rule C17), so that
/// its ops run dry; as they are otherwise.
pub(crate) fn dry_inputs(flat: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
    flat.into_iter()
        .map(|t| match t {
            Some(t) => Ok(Some(bridge::dry_copy(&t)?.unwrap_or(t))),
            None => Ok(None),
        })
        .collect()
}

/// What reading a tensor computed after the stop says (E37).
pub(crate) fn read_message(name: &str) -> String {
    format!(
        "remat: checkpoint `{name}`: this tensor was computed after its recomputation \
         stopped early (docs/semantics.md, rule C17): from the op that saved the last \
         tensor backward needs, recomputation computes nothing that depends on that op, \
         so the tensor has a shape but no values. The closure reads values in its tail; \
         turn early stop off for this checkpoint: `.early_stop(false)` \
         (`#[checkpoint(early_stop = false)]`)"
    )
}

/// What an op without a meta kernel, run on a tensor computed after the
/// stop, says (E38); `{op}` is the op's name.
pub(crate) fn no_meta_message(name: &str) -> String {
    format!(
        "remat: checkpoint `{name}`: after its recomputation stopped early \
         (docs/semantics.md, rule C17), its tail ran `{{op}}` on a tensor computed after \
         the stop, and `{{op}}` has no meta kernel, so the shape of its result is \
         unknown. Turn early stop off for this checkpoint: `.early_stop(false)` \
         (`#[checkpoint(early_stop = false)]`)"
    )
}

/// The process-wide switch: 0 as the environment says, 1 on, 2 off.
static GLOBAL: AtomicU8 = AtomicU8::new(0);

/// Sets the process-wide default (`Checkpoint::set_default_early_stop`).
pub(crate) fn set_default(on: bool) {
    GLOBAL.store(if on { 1 } else { 2 }, Ordering::Relaxed);
}

/// The process-wide default (`Checkpoint::default_early_stop`): the last
/// [`set_default`], else `REMAT_EARLY_STOP`, else on; off where the process
/// cannot stop.
pub(crate) fn default_on() -> bool {
    available()
        && match GLOBAL.load(Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => from_environment(),
        }
}

/// `REMAT_EARLY_STOP`, read once, in the style of `REMAT_STRICT_RECOMPUTE`.
// docs/semantics.md, rule C18: the environment variable, read once; on
// unless it says off.
fn from_environment() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        !std::env::var("REMAT_EARLY_STOP").is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "0" | "false" | "off" | "no"
            )
        })
    })
}

/// What one replay must rebuild before it may stop, and whether it did.
#[derive(Default)]
pub(crate) struct StopState {
    /// Early stop applies to this replay.
    on: bool,
    /// Holders to refill: one past the last holder autograd still keeps.
    holders: usize,
    /// Skipped `Save` regions whose rebuilt saves backward reads (S3).
    rebuilds: usize,
    /// Of those, how many this replay has served.
    rebuilt: usize,
    /// The replay stopped: what it still runs is the tail.
    stopped: bool,
}

impl StopState {
    /// The needs of a replay starting now: the first `holders` holders in
    /// save order (up to the last one autograd still keeps: one it released,
    /// its node gone, is never unpacked) and `rebuilds` skipped regions.
    // docs/semantics.md, rule C17.
    pub(crate) fn start(on: bool, holders: usize, rebuilds: usize) -> StopState {
        StopState {
            on,
            holders,
            rebuilds,
            rebuilt: 0,
            stopped: false,
        }
    }

    /// The stop rule, the one place it is written (docs/semantics.md, rule
    /// C17): whether the replay is stopped once `refilled` holders are
    /// filled, that is, whether it already was or has now rebuilt
    /// everything the backward can still unpack. From the first `true` on,
    /// every later call says `true` (the module's invariant).
    pub(crate) fn reached(&mut self, refilled: usize) -> bool {
        self.stopped |= self.would_reach(refilled);
        self.stopped
    }

    /// Whether [`StopState::reached`] would say the replay stops once
    /// `refilled` holders are filled, without noting it.
    pub(crate) fn would_reach(&self, refilled: usize) -> bool {
        self.stopped || (self.on && refilled >= self.holders && self.rebuilt >= self.rebuilds)
    }

    /// Whether the replay stopped: what it still runs is the tail.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped
    }

    /// Counts a skipped `Save` region that rebuilt its saves.
    pub(crate) fn note_rebuilt(&mut self) {
        self.rebuilt += 1;
    }
}
