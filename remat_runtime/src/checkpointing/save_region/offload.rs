//! `Offload` regions: what a `Save` region keeps is copied to the target
//! device, one storage at a time, and copied back when backward (or a
//! replay serving an output) needs it.
//!
//! Invariants: a record's store holds at most one copy per source storage
//! and version (views and outputs of one storage share it, so a storage is
//! moved once, as `Save` bills it once); the copy brought back is shared by
//! every view unpacked from it until all of them have been unpacked, then
//! dropped, so the device holds it only while backward uses it.
//!
//! docs/semantics.md rules kept here: O1 (what moves and where), O2
//! (parameters stay), O3 (the in-place check through the version counter),
//! O4 (one copy per storage), O5 (copies on CUDA).

use crate::bridge::{storage_key, storage_nbytes, storage_offset, StorageKey, VersionCounter};
use crate::bridge::{tensor_version, WeakStorage};
use crate::fast_hash::FastMap;
use crate::sync::lock;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tch::{Device, Kind, Tensor};

/// The copies one `Offload` region made.
pub(crate) struct OffloadStore {
    pub target: Device,
    storages: Mutex<FastMap<(StorageKey, Kind), Arc<Moved>>>,
    /// Numbers the tensors offloaded, so a moved storage knows which of its
    /// views were unpacked.
    next_id: AtomicUsize,
}

/// One source storage's copy on the target.
pub(crate) struct Moved {
    source: Device,
    target: Device,
    kind: Kind,
    pub nbytes: i64,
    /// The source's version when copied: a later save of the same storage
    /// at another version is copied again (O4).
    version: u32,
    /// Pins the source storage's address while the copy lives, so its key
    /// names no other storage (the memory itself is freed as usual).
    _pin: Option<WeakStorage>,
    /// Tensors are not `Sync`: the copies sit behind the lock.
    back: Mutex<Back>,
    /// What reports call it: the names of the saves and outputs on it.
    pub names: Mutex<Vec<String>>,
    pub sizes: Vec<i64>,
}

/// The copy on the target, the copy brought back to the source device, and
/// which views of it were unpacked since.
struct Back {
    /// The whole storage, as a flat tensor of `kind`, on the target.
    copy: Tensor,
    flat: Option<Tensor>,
    users: usize,
    unpacked: HashSet<usize>,
}

/// A kept tensor as a view into a moved storage.
#[derive(Clone)]
pub(crate) struct Offloaded {
    id: usize,
    storage: Arc<Moved>,
    sizes: Vec<i64>,
    strides: Vec<i64>,
    offset: i64,
    /// The original's version counter and its version when offloaded.
    counter: Arc<VersionCounter>,
    version: u32,
}

impl OffloadStore {
    pub(crate) fn new(target: Device) -> Self {
        OffloadStore {
            target,
            storages: Mutex::default(),
            next_id: AtomicUsize::new(0),
        }
    }

    /// Copies `t`'s storage to the target (once per storage and version)
    /// and returns how to rebuild `t` from the copy.
    // docs/semantics.md, rules O1 and O4.
    pub(crate) fn offload(&self, t: &Tensor, name: &str) -> Result<Offloaded, String> {
        let version = tensor_version(t).map_err(|e| e.to_string())?;
        let counter = Arc::new(VersionCounter::of(t).map_err(|e| e.to_string())?);
        let kind = t.kind();
        let key = storage_key(t).ok_or("an offloaded tensor has no storage")?;
        let storage = {
            let mut storages = lock(&self.storages);
            match storages.get(&(key, kind)) {
                Some(m) if m.version == version => m.clone(),
                _ => {
                    let moved = Arc::new(move_storage(t, kind, version, self.target)?);
                    storages.insert((key, kind), moved.clone());
                    moved
                }
            }
        };
        lock(&storage.names).push(name.to_string());
        lock(&storage.back).users += 1;
        Ok(Offloaded {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            storage,
            sizes: t.size(),
            strides: t.stride(),
            offset: storage_offset(t),
            counter,
            version,
        })
    }

    /// The storages moved, each once.
    pub(crate) fn moved(&self) -> Vec<Arc<Moved>> {
        let storages = lock(&self.storages);
        let mut seen = HashSet::new();
        let mut all: Vec<Arc<Moved>> = storages
            .values()
            .filter(|m| seen.insert(Arc::as_ptr(m)))
            .cloned()
            .collect();
        all.sort_by_key(|m| lock(&m.names).first().cloned());
        all
    }
}

/// The flat copy of `t`'s whole storage on `target`: copying the storage,
/// not the view, keeps every view's layout (so backward computes exactly as
/// with the original) and moves a storage shared by several saves once.
fn move_storage(t: &Tensor, kind: Kind, version: u32, target: Device) -> Result<Moved, String> {
    let nbytes = storage_nbytes(t);
    let elements = nbytes / kind.elt_size_in_bytes() as i64;
    let flat = t
        .f_as_strided([elements], [1], Some(0))
        .map_err(|e| e.to_string())?;
    let copy = transfer(&flat, target)?;
    Ok(Moved {
        source: t.device(),
        target,
        kind,
        nbytes,
        version,
        _pin: WeakStorage::new(t),
        back: Mutex::new(Back {
            copy,
            flat: None,
            users: 0,
            unpacked: HashSet::new(),
        }),
        names: Mutex::default(),
        sizes: t.size(),
    })
}

/// A copy of `t` on `device`, always a new buffer (also when `t` is there
/// already). Copies from or to a CUDA device do not block the host: from
/// the device they land in pinned host memory, and both directions run in
/// order on the current stream, so a copy back never overtakes its copy out.
// docs/semantics.md, rule O5.
fn transfer(t: &Tensor, device: Device) -> Result<Tensor, String> {
    let non_blocking = t.device().is_cuda() || device.is_cuda();
    t.f_to_device_(device, t.kind(), non_blocking, true)
        .map_err(|e| e.to_string())
}

impl Offloaded {
    /// The tensor again, on its own device. `Err` if the original was
    /// modified in place since it was offloaded.
    // docs/semantics.md, rule O3.
    pub(crate) fn restore(&self) -> Result<Tensor, String> {
        let now = self.counter.get();
        if now != self.version {
            return Err(format!(
                "was modified in place after it was offloaded (version {}, now {now}); clone \
                 it before modifying it",
                self.version
            ));
        }
        let m = &self.storage;
        let flat = {
            let mut back = lock(&m.back);
            let flat = match &back.flat {
                Some(flat) => flat.shallow_clone(),
                None => {
                    let flat = transfer(&back.copy, m.source)?;
                    back.flat = Some(flat.shallow_clone());
                    flat
                }
            };
            back.unpacked.insert(self.id);
            if back.unpacked.len() >= back.users {
                // Every view has its tensor: the shared copy goes with the
                // last of them.
                back.flat = None;
                back.unpacked.clear();
            }
            flat
        };
        debug_assert_eq!(flat.kind(), m.kind);
        flat.f_as_strided(
            self.sizes.as_slice(),
            self.strides.as_slice(),
            Some(self.offset),
        )
        .map_err(|e| e.to_string())
    }
}

impl Moved {
    /// Where the copy is.
    pub(crate) fn target(&self) -> Device {
        self.target
    }

    /// The element type it was copied as.
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }
}
