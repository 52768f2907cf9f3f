//! Early stop: a recomputation ends as soon as it has rebuilt everything
//! the backward can still unpack, so the closure's tail after its last
//! save never runs again. Off unless asked for, and unavailable under
//! `panic = "abort"`: the stop unwinds through the user's closure (below),
//! which poisons a `Mutex` guard it holds and would abort such a build.
//!
//! How the stop travels: the replay's pack hook (called from C++ inside an
//! op) fails with [`STOP`], libtorch raises it as an exception out of that
//! op, tch hands it to the closure as an `Err` (its infallible ops unwrap
//! it: a Rust panic, on the Rust side of the bridge), and the replay driver
//! catches the unwind and, seeing [`StopState::stopped`], returns normally.
//! A skipped `Save` region that rebuilds the last thing needed stops from
//! Rust directly, with `std::panic::resume_unwind` and a payload of its
//! own. No panic crosses C++ either way: every callback C++ makes into Rust
//! catches unwinds, and the driver's catch is quiet (the panic hook prints
//! nothing for a replay). The flag, not the payload or the message,
//! decides: whatever the closure makes of the failure (a panic of its own,
//! an error it catches and goes on from), nothing backward needs is
//! missing once the flag is set.
//!
//! Invariant: once `stopped` is set for a replay, every later save of that
//! replay fails with [`STOP`] again, so nothing after the stop refills a
//! holder, and a closure that catches the failure gets the next one at its
//! next save.
//!
//! docs/semantics.md rules kept here: C17 (when a replay stops), C18 (the
//! switches and their precedence), C19 (what the tail misses).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// The message of the pack hook's failure that stops a replay; it only
/// ever shows if a closure prints the errors it swallows.
pub(crate) const STOP: &str =
    "remat: recomputation stopped early, every saved tensor is rebuilt (not an error)";

/// The payload a skipped `Save` region unwinds with when it rebuilt the
/// last thing the backward needs.
pub(crate) struct Stopped;

/// Ends the running replay from Rust (no C++ frame is in between: see the
/// module's comment). `resume_unwind` does not run the panic hook.
pub(crate) fn stop_now() -> ! {
    std::panic::resume_unwind(Box::new(Stopped))
}

/// Whether this build can stop a recomputation at all: the stop unwinds
/// through the closure, and a build with `panic = "abort"` (cargo passes the
/// profile's strategy to every crate it compiles, so this crate sees the
/// binary's) would abort the process there instead (rule C18).
pub(crate) const AVAILABLE: bool = cfg!(panic = "unwind");

/// The process-wide switch: 0 as the environment says, 1 on, 2 off.
static GLOBAL: AtomicU8 = AtomicU8::new(0);

/// Sets the process-wide default (`Checkpoint::set_default_early_stop`).
pub(crate) fn set_default(on: bool) {
    GLOBAL.store(if on { 1 } else { 2 }, Ordering::Relaxed);
}

/// The process-wide default (`Checkpoint::default_early_stop`): the last
/// [`set_default`], else `REMAT_EARLY_STOP`, else off; always off without
/// unwinding.
pub(crate) fn default_on() -> bool {
    AVAILABLE
        && match GLOBAL.load(Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => from_environment(),
        }
}

/// `REMAT_EARLY_STOP`, read once, in the style of `REMAT_STRICT_RECOMPUTE`.
// docs/semantics.md, rule C18: the environment variable, read once; off
// unless it says on.
fn from_environment() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("REMAT_EARLY_STOP").is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "on" | "yes"
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
        self.stopped |= self.on && refilled >= self.holders && self.rebuilt >= self.rebuilds;
        self.stopped
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
