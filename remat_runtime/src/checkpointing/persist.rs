//! The persist index: which storages belong to `Save` outputs, so that a
//! consumer that replays can ask the producer to keep the value
//! (semantics.md, "Who asks for a Save output to be kept").
//!
//! Invariant: entries hold the outputs weakly (an output nobody asks for is
//! freed after the forward) and pin their storage's address, so a key never
//! names another storage while the entry exists.

use crate::bridge::{storage_key, StorageKey, WeakStorage, WeakTensor};
use crate::checkpointing::record::SaveRecord;
use crate::io::RegionInputs;
use crate::sync::lock;
use std::collections::HashMap;
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

/// Keyed by storage: any view of a `Save` output finds its producer.
#[derive(Default)]
pub(crate) struct PersistIndex {
    map: HashMap<StorageKey, Vec<Entry>>,
}

impl PersistIndex {
    /// Registers output `slot` of `record`, whose storage is `key`.
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
        self.map.entry(key).or_default().push(Entry {
            record: record.clone(),
            slot,
            output: WeakTensor::new(output),
            _pin: pin,
        });
    }

    pub(crate) fn contains(&self, t: &Tensor) -> bool {
        storage_key(t).is_some_and(|k| self.map.contains_key(&k))
    }

    fn lookup(&self, t: &Tensor) -> Vec<(Arc<SaveRecord>, usize, Option<Tensor>)> {
        let Some(entries) = storage_key(t).and_then(|k| self.map.get(&k)) else {
            return Vec::new();
        };
        entries
            .iter()
            .map(|e| (e.record.clone(), e.slot, e.output.upgrade()))
            .collect()
    }
}

/// Asks the producers of the tensors in `inputs` (those that are `Save`
/// outputs in `index`, or views of one) to keep them for replay.
pub(crate) fn persist(
    index: &Mutex<PersistIndex>,
    inputs: &impl RegionInputs,
) -> crate::Result<()> {
    let found = {
        let index = lock(index);
        // The common case, and the hot path: no Save output to look for.
        if index.map.is_empty() {
            return Ok(());
        }
        let mut found = Vec::new();
        inputs.visit_tensors(&mut |t| found.extend(index.lookup(t)));
        found
    };
    // Persisting may run the user's pack hook: not under the state's lock.
    for (record, slot, output) in found {
        if let Some(output) = output {
            record.persist(slot, &output, true)?;
        }
    }
    Ok(())
}
