//! The random state a checkpoint keeps by default, so that its
//! recomputation draws the numbers its forward drew (dropout masks,
//! `rand_like`, `bernoulli`, ...): libtorch's default generators, CPU and
//! every visible CUDA device, as torch.utils.checkpoint's
//! `preserve_rng_state=True` keeps them, and also across skipped `Save`
//! regions, which torch has not.
//!
//! What the forward takes: a snapshot at entry; at each `Save` region's
//! exit, a snapshot only if something drew since the last one (a skipped
//! region's body draws nothing on recomputation, so recomputation must jump
//! over its draws; where nothing drew there is nothing to jump over); and
//! when the forward ends, if nothing drew at all, it lets go of everything:
//! recomputation then touches no generator, and a closure that draws
//! nothing costs two comparisons of the generators' state and one copy.
//!
//! Invariant: a snapshot is taken only on the forward and only restored
//! during recomputation; every recomputation that restores puts the
//! generators back as it found them when it ends, however it ends.
//!
//! docs/semantics.md rules kept here: C14 (what is kept and restored, the
//! switches), C20 (the cost where nothing draws).

use crate::bridge::GeneratorsSnapshot;
use crate::error::Result;
use crate::sync::lock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// The process-wide switch: 0 as the environment says, 1 on, 2 off.
static GLOBAL: AtomicU8 = AtomicU8::new(0);

/// Sets the process-wide default (`Checkpoint::set_default_preserve_rng_state`).
pub(crate) fn set_default(on: bool) {
    GLOBAL.store(if on { 1 } else { 2 }, Ordering::Relaxed);
}

/// The process-wide default: the last [`set_default`], else
/// `REMAT_PRESERVE_RNG_STATE`, else on.
// docs/semantics.md, rule C14: on unless switched off.
pub(crate) fn default_on() -> bool {
    match GLOBAL.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => from_environment(),
    }
}

/// `REMAT_PRESERVE_RNG_STATE`, read once: only `0`, `false`, `off` or `no`
/// turn it off.
fn from_environment() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        !std::env::var("REMAT_PRESERVE_RNG_STATE").is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "0" | "false" | "off" | "no"
            )
        })
    })
}

/// What one checkpoint call keeps of the generators.
pub(crate) struct RandomState {
    /// `None` when the checkpoint does not keep the random state, or once
    /// its forward ended having drawn nothing.
    kept: Mutex<Option<Kept>>,
}

struct Kept {
    /// The generators when the forward started.
    entry: Arc<GeneratorsSnapshot>,
    /// The last snapshot the forward took (the entry, or a `Save` region's
    /// exit): a region whose exit finds the generators still in it needs
    /// none of its own.
    latest: Arc<GeneratorsSnapshot>,
}

impl RandomState {
    /// Keeps nothing: the checkpoint opted out.
    pub(crate) fn off() -> RandomState {
        RandomState {
            kept: Mutex::new(None),
        }
    }

    /// The snapshot at the forward's entry.
    pub(crate) fn at_entry() -> Result<RandomState> {
        let entry = Arc::new(GeneratorsSnapshot::take()?);
        Ok(RandomState {
            kept: Mutex::new(Some(Kept {
                latest: entry.clone(),
                entry,
            })),
        })
    }

    /// At a `Save` region's exit on the forward: the snapshot that its
    /// skipped body must leave behind on recomputation, if anything drew
    /// since the last snapshot (`None`: recomputation reaches the region
    /// with the generators as the forward left it).
    pub(crate) fn at_save_exit(&self) -> Result<Option<Arc<GeneratorsSnapshot>>> {
        let mut kept = lock(&self.kept);
        let Some(kept) = kept.as_mut() else {
            return Ok(None);
        };
        if kept.latest.is_current()? {
            return Ok(None);
        }
        let now = Arc::new(GeneratorsSnapshot::take()?);
        kept.latest = now.clone();
        Ok(Some(now))
    }

    /// When the forward's closure returned: a forward that drew nothing
    /// needs nothing restored, and keeps nothing. (A comparison that fails
    /// counts as a draw: restoring is always right.)
    pub(crate) fn end_forward(&self) {
        let mut kept = lock(&self.kept);
        if let Some(k) = kept.as_ref() {
            let drew = !Arc::ptr_eq(&k.latest, &k.entry) || !k.latest.is_current().unwrap_or(false);
            if !drew {
                *kept = None;
            }
        }
    }

    /// For a recomputation: the generators put in their state at the
    /// forward's entry, and put back as they are now when the returned
    /// guard drops (also on an error or a panic). `None` when there is
    /// nothing to restore.
    pub(crate) fn enter_recompute(&self) -> Result<Option<Resume>> {
        let entry = match lock(&self.kept).as_ref() {
            Some(k) => k.entry.clone(),
            None => return Ok(None),
        };
        let outer = GeneratorsSnapshot::take()?;
        entry.restore()?;
        Ok(Some(Resume(Some(outer))))
    }
}

/// Puts the generators back as they were before a recomputation when
/// dropped, so that its draws never reach the rest of backward.
pub(crate) struct Resume(Option<GeneratorsSnapshot>);

impl Resume {
    /// Puts them back now, reporting a failure.
    pub(crate) fn finish(mut self) -> Result<()> {
        match self.0.take() {
            Some(outer) => outer.restore(),
            None => Ok(()),
        }
    }
}

impl Drop for Resume {
    fn drop(&mut self) {
        // On an error path: what is being reported already says what went
        // wrong; a failure to put the state back cannot be told any more.
        if let Some(outer) = self.0.take() {
            let _ = outer.restore();
        }
    }
}
