//! The output index: which storages belong to `Save` outputs, so that a
//! consumer that replays can ask the producer to keep the value
//! (docs/semantics.md, rules K1-K7: "Asking for a Save output").
//!
//! Invariant: entries hold the outputs weakly (an output nobody asks for is
//! freed after the forward) and pin their storage's address, so a key never
//! names another storage while the entry exists.

use crate::bridge::{alias_with_layout, detached_alias, tensor_version, FromWeak, KeptStorage};
use crate::bridge::{storage_key, StorageKey, WeakStorage, WeakTensor};
use crate::checkpointing::path::{Asker, At, Path, Step};
use crate::checkpointing::save_region::record::{SaveRecord, Slot};
use crate::checkpointing::tensor_hooks::SavedTensorKind;
use crate::error::Result;
use crate::fast_hash::FastMap;
use crate::io::RegionInput;
use crate::sync::lock;
use std::sync::{Arc, Mutex};
use tch::Tensor;

struct Entry {
    record: Arc<SaveRecord>,
    slot: usize,
    /// Weak: an output nobody consumes is freed after the forward.
    output: WeakTensor,
    /// Pins the storage's address, so the key cannot be reused.
    _pin: WeakStorage,
}

/// The entries of one storage: almost always one, kept inline (no
/// allocation per `Save` output).
struct Entries {
    first: Entry,
    more: Vec<Entry>,
}

/// Keyed by storage: any view of a `Save` output finds its producer.
#[derive(Default)]
pub(crate) struct OutputIndex {
    map: FastMap<StorageKey, Entries>,
}

impl OutputIndex {
    /// An index with room for `storages` before it grows.
    pub(crate) fn with_capacity(storages: usize) -> Self {
        OutputIndex {
            map: FastMap::with_capacity_and_hasher(storages, Default::default()),
        }
    }

    /// How many storages it holds entries for.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Registers output `slot` of `record`, whose storage is `key`.
    // docs/semantics.md, rule S7: by storage, weakly, the address pinned.
    pub(crate) fn register(
        &mut self,
        record: &Arc<SaveRecord>,
        slot: usize,
        output: &Tensor,
        key: Option<StorageKey>,
    ) {
        let (Some(key), Some(pin)) = (key, WeakStorage::new(output)) else {
            return;
        };
        let entry = Entry {
            record: record.clone(),
            slot,
            output: WeakTensor::new(output),
            _pin: pin,
        };
        match self.map.entry(key) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().more.push(entry),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Entries {
                    first: entry,
                    more: Vec::new(),
                });
            }
        }
    }

    pub(crate) fn contains_key(&self, key: StorageKey) -> bool {
        self.map.contains_key(&key)
    }

    /// Calls `f` with each output registered under `t`'s storage and what
    /// to keep it from: the output while a handle to it lives (as its
    /// storage and counter where it can be rebuilt from them), else `t`, a
    /// view on its storage.
    fn lookup(
        &self,
        t: &Tensor,
        f: &mut impl FnMut(&Arc<SaveRecord>, usize, Source),
    ) -> Result<()> {
        let Some(entries) = storage_key(t).and_then(|k| self.map.get(&k)) else {
            return Ok(());
        };
        for e in std::iter::once(&entries.first).chain(&entries.more) {
            let source = match KeptStorage::of_weak(&e.output)? {
                FromWeak::Kept(value, version) => Source::Stored(value, version),
                FromWeak::Live(output) => Source::Output(output),
                // docs/semantics.md, rule K9: asked through a view whose
                // output is gone (a `detach()` of it), the output comes back
                // from the view's storage and its recorded layout.
                FromWeak::Gone => Source::View(t.shallow_clone()),
            };
            f(&e.record, e.slot, source);
        }
        Ok(())
    }
}

/// What an output is kept from.
pub(crate) enum Source {
    /// The output itself.
    Output(Tensor),
    /// The output's storage and counter, taken while it was alive, and its
    /// version then.
    Stored(KeptStorage, u32),
    /// A tensor on the output's storage, the output being gone (rule K9).
    View(Tensor),
}

/// Asks the producers of the tensors in `inputs` (those that are `Save`
/// outputs in a checkpoint's output `index`, or views of one) to keep them
/// for replay, and notes each ask on that checkpoint's `path` (rule R11).
pub(crate) fn ask_producers(
    index: &Mutex<OutputIndex>,
    path: &Mutex<Path>,
    inputs: &impl RegionInput,
    by: &Asker,
    at: At,
) -> crate::Result<()> {
    let found = {
        let index = lock(index);
        // docs/semantics.md, rule B2.
        // The common case, and the hot path: no Save output to look for.
        if index.map.is_empty() {
            return Ok(());
        }
        // The first found inline: one input found once is the common case.
        let (mut first, mut more, mut failed) = (None, Vec::new(), Ok(()));
        inputs.visit(&mut |t| {
            // docs/semantics.md, rules K2, K4 and K6: any tensor on a Save output's
            // storage (the output or a view of it) asks for the whole output.
            let looked = index.lookup(t, &mut |record, slot, source| {
                let found = (record.clone(), slot, source);
                if first.is_none() {
                    first = Some(found);
                } else {
                    more.push(found);
                }
            });
            if failed.is_ok() {
                failed = looked;
            }
        });
        failed?;
        first.into_iter().chain(more)
    };
    // Keeping may run the user's pack hook: not under the state's lock.
    for (record, slot, source) in found {
        record.keep(slot, source, true)?;
        lock(path).record(Step::ask(record, slot, by.clone(), at));
    }
    Ok(())
}

impl SaveRecord {
    /// Keeps output `slot` for replay from `source` (idempotent); `asked`
    /// says that a consumer asked for it.
    pub(crate) fn keep(&self, slot: usize, source: Source, asked: bool) -> Result<()> {
        let mut inner = self.inner();
        let Some(out) = inner.outputs_mut().get_mut(slot) else {
            return Ok(());
        };
        // docs/semantics.md, rules K6 (asking twice keeps once) and P5 (what was
        // asked for, as opposed to resident anyway).
        if !out.ask(asked) {
            return Ok(());
        }
        let has_spec = out.spec().is_some();
        let (hooks, context) = inner.output_pair();
        // docs/semantics.md, rule K7: without hooks or a target, an output
        // is kept as its storage and counter where it can be rebuilt from
        // them: no tensor of its own until a replay serves it.
        let plain = hooks.is_none() && self.offload.is_none();
        let stored = match source {
            Source::Stored(value, version) if plain => Ok((value, version)),
            Source::Output(t) if plain => KeptStorage::of(&t)?.ok_or(Source::Output(t)),
            Source::View(t) if plain && has_spec => KeptStorage::of(&t)?.ok_or(Source::View(t)),
            other => Err(other),
        };
        let source = match stored {
            Ok((value, version)) => {
                inner.outputs_mut()[slot].keep(Slot::Stored { value, version });
                return Ok(());
            }
            Err(source) => source,
        };
        let meta = inner.outputs()[slot].spec().map(|s| &s.meta);
        let value = match (source, meta) {
            (Source::Output(output), _) => detached_alias(&output)?,
            (Source::Stored(value, _), Some(meta)) => value.tensor(meta)?,
            // docs/semantics.md, rule K9: the output's layout over the view's
            // storage, with the view's (the storage's) version counter.
            (Source::View(view), Some(meta)) => alias_with_layout(&view, meta)?,
            (Source::Stored(..) | Source::View(_), None) => return Ok(()),
        };
        // docs/semantics.md, rules K7 and O1: packed by the pair in effect at
        // region entry with kind SaveOutput (S6 before offload), copied to an
        // `Offload` region's target, or a detached alias with its version.
        let kept = match (hooks, &self.offload) {
            (Some(hooks), _) => {
                let payload = hooks
                    .pack(value, SavedTensorKind::SaveOutput, context, false)
                    .map_err(|m| self.error(format!("packing output {slot}: {m}")))?;
                Slot::Packed { hooks, payload }
            }
            (None, Some(store)) if storage_key(&value).is_some() => {
                let value = store
                    .offload(&value, &format!("output.{slot}"))
                    .map_err(|m| self.error(format!("offloading output {slot}: {m}")))?;
                Slot::Offloaded(value)
            }
            (None, _) => {
                let version = tensor_version(&value)?;
                Slot::Resident { value, version }
            }
        };
        inner.outputs_mut()[slot].keep(kept);
        Ok(())
    }
}
