//! How big a checkpoint's per-region tables start: at the sizes the last
//! forward of the same checkpoint (by name) on this thread reached; and the
//! claimed-name set of a finished frame reused by the next.
//!
//! A training loop calls the same checkpoints every step, so the last
//! forward's sizes are the next one's. Growing the tables from empty
//! instead rehashes every name and storage key at each doubling, the
//! largest map cost of a region on the forward (docs/performance.md,
//! section 3). These are hints only: a table smaller than needed still
//! grows, one larger wastes a few bytes per entry until the checkpoint's
//! state is freed.

use crate::fast_hash::{FastMap, FastSet};
use std::borrow::Cow;
use std::cell::RefCell;

/// The sizes one checkpoint forward's tables reached.
#[derive(Clone, Copy, Default)]
pub(crate) struct Sizes {
    /// `Save` regions (their records).
    pub records: usize,
    /// Storages in the output index.
    pub indexed: usize,
    /// Steps of the forward's path (docs/semantics.md, rule R11).
    pub steps: usize,
}

/// Claimed-name sets larger than this are freed rather than kept, so one
/// huge checkpoint does not pin its table for the thread's life.
const KEEP_AT_MOST: usize = 4096;

/// Spare sets kept per thread: one per nesting level commonly in use.
const SPARES: usize = 4;

/// Checkpoint names remembered per thread; past this (names made per call,
/// say) the memory starts over.
const NAMES_AT_MOST: usize = 256;

thread_local! {
    /// By checkpoint name (unnamed checkpoints share `""`).
    static LAST: RefCell<FastMap<Box<str>, Sizes>> = RefCell::new(FastMap::default());
    static CLAIMED: RefCell<Vec<FastSet<Cow<'static, str>>>> = const { RefCell::new(Vec::new()) };
}

/// The sizes the last forward of checkpoint `name` on this thread reached.
pub(crate) fn last(name: Option<&str>) -> Sizes {
    LAST.try_with(|l| l.borrow().get(name.unwrap_or("")).copied())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Records what a forward of checkpoint `name` reached, for its next call
/// on this thread.
pub(crate) fn reached(name: Option<&str>, sizes: Sizes) {
    let name = name.unwrap_or("");
    let _ = LAST.try_with(|l| {
        let mut l = l.borrow_mut();
        if let Some(s) = l.get_mut(name) {
            *s = sizes;
            return;
        }
        if l.len() >= NAMES_AT_MOST {
            l.clear();
        }
        l.insert(name.into(), sizes);
    });
}

/// An empty claimed-name set, with the capacity an earlier frame left.
pub(crate) fn claimed_set() -> FastSet<Cow<'static, str>> {
    CLAIMED
        .try_with(|c| c.try_borrow_mut().ok().and_then(|mut c| c.pop()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Takes back a finished frame's set: emptied, its capacity kept.
pub(crate) fn recycle(mut set: FastSet<Cow<'static, str>>) {
    if set.capacity() == 0 || set.capacity() > KEEP_AT_MOST {
        return;
    }
    set.clear();
    // `try_with`: a frame dropped while the thread's locals are torn down
    // just frees its set.
    let _ = CLAIMED.try_with(|c| {
        if let Ok(mut spares) = c.try_borrow_mut() {
            if spares.len() < SPARES {
                spares.push(set);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_set_comes_back_empty_with_its_capacity() {
        let mut set = claimed_set();
        for i in 0..100 {
            set.insert(Cow::Owned(format!("r{i}")));
        }
        let capacity = set.capacity();
        recycle(set);
        let again = claimed_set();
        assert!(again.is_empty());
        assert_eq!(again.capacity(), capacity);
    }

    #[test]
    fn sizes_are_remembered_per_checkpoint() {
        let block = Sizes {
            records: 12,
            indexed: 30,
            steps: 40,
        };
        reached(Some("block"), block);
        reached(Some("head"), Sizes::default());
        reached(
            None,
            Sizes {
                records: 1,
                indexed: 2,
                steps: 3,
            },
        );
        assert_eq!(last(Some("block")).records, 12);
        assert_eq!(last(Some("block")).indexed, 30);
        assert_eq!(last(Some("block")).steps, 40);
        assert_eq!(last(Some("head")).records, 0);
        assert_eq!(last(None).indexed, 2);
        assert_eq!(last(Some("never")).records, 0);
    }

    #[test]
    fn a_huge_set_is_not_kept() {
        let mut set = claimed_set();
        for i in 0..=KEEP_AT_MOST {
            set.insert(Cow::Owned(format!("r{i}")));
        }
        recycle(set);
        assert_eq!(claimed_set().capacity(), 0);
    }
}
