//! `Offload` regions: what a `Save` region keeps is copied to the target
//! device, one storage at a time, and copied back when backward (or a
//! replay serving an output) needs it.
//!
//! Invariants: a record's store holds at most one copy per source storage
//! and version (views and outputs of one storage share it, so a storage is
//! moved once, as `Save` bills it once); the copy brought back is shared by
//! every view unpacked from it until all of them have been unpacked, then
//! dropped, so the device holds it only while backward uses it (or, once
//! prefetched, from the first unpack of the region after it in forward
//! order).
//!
//! docs/semantics.md rules kept here: O1 (what moves and where), O2
//! (parameters stay), O3 (the in-place check through the version counter),
//! O4 (one copy per storage), O5 (copies on CUDA), O6 (prefetch).

use crate::bridge::cuda_copy::{self, CopyEvent};
use crate::bridge::{storage_key, storage_nbytes, storage_offset, StorageKey, VersionCounter};
use crate::bridge::{tensor_version, WeakStorage};
use crate::fast_hash::FastMap;
use crate::sync::lock;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tch::{Device, Kind, Tensor};

/// The copies one `Offload` region made.
pub(crate) struct OffloadStore {
    pub target: Device,
    storages: Mutex<FastMap<(StorageKey, Kind), Arc<Moved>>>,
    /// Numbers the tensors offloaded, so a moved storage knows which of its
    /// views were unpacked.
    next_id: AtomicUsize,
    /// Set by its first unpack, which prefetches the store before it.
    prefetched: AtomicBool,
}

/// Every live store, in the order their regions ran: backward meets them
/// in reverse (docs/semantics.md, rule O6).
static ORDER: Mutex<Vec<Weak<OffloadStore>>> = Mutex::new(Vec::new());

/// One source storage's copy on the target.
pub(crate) struct Moved {
    /// The store that made it: its first unpack prefetches the one before.
    store: Weak<OffloadStore>,
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
    /// When the copy out ran on a side stream: the event that says it is done.
    out_done: Option<CopyEvent>,
    /// Brought back, with the side-stream event of that copy.
    flat: Option<(Tensor, Option<CopyEvent>)>,
    users: usize,
    unpacked: HashSet<usize>,
    /// How many times it was brought back (prefetches included).
    fetches: usize,
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
    /// A new store, after every live one in rule O6's order.
    pub(crate) fn new(target: Device) -> Arc<Self> {
        let store = Arc::new(OffloadStore {
            target,
            storages: Mutex::default(),
            next_id: AtomicUsize::new(0),
            prefetched: AtomicBool::new(false),
        });
        let mut order = lock(&ORDER);
        order.retain(|w| w.strong_count() > 0);
        order.push(Arc::downgrade(&store));
        store
    }

    /// Copies `t`'s storage to the target (once per storage and version)
    /// and returns how to rebuild `t` from the copy.
    // docs/semantics.md, rules O1 and O4.
    pub(crate) fn offload(self: &Arc<Self>, t: &Tensor, name: &str) -> Result<Offloaded, String> {
        let version = tensor_version(t).map_err(|e| e.to_string())?;
        let counter = Arc::new(VersionCounter::of(t).map_err(|e| e.to_string())?);
        let kind = t.kind();
        let key = storage_key(t).ok_or("an offloaded tensor has no storage")?;
        let storage = {
            let mut storages = lock(&self.storages);
            match storages.get(&(key, kind)) {
                Some(m) if m.version == version => m.clone(),
                _ => {
                    let moved = Arc::new(move_storage(self, t, kind, version)?);
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

/// The flat copy of `t`'s whole storage on the store's target: copying the
/// storage, not the view, keeps every view's layout (so backward computes
/// exactly as with the original) and moves a storage shared by several
/// saves once.
fn move_storage(
    store: &Arc<OffloadStore>,
    t: &Tensor,
    kind: Kind,
    version: u32,
) -> Result<Moved, String> {
    let target = store.target;
    let nbytes = storage_nbytes(t);
    let elements = nbytes / kind.elt_size_in_bytes() as i64;
    let flat = t
        .f_as_strided([elements], [1], Some(0))
        .map_err(|e| e.to_string())?;
    let (copy, out_done) = if side_stream(t.device(), target) {
        let (host, done) = cuda_copy::copy_out(&flat).map_err(|e| e.to_string())?;
        (host, Some(done))
    } else {
        (transfer(&flat, target)?, None)
    };
    Ok(Moved {
        store: Arc::downgrade(store),
        source: t.device(),
        target,
        kind,
        nbytes,
        version,
        _pin: WeakStorage::new(t),
        back: Mutex::new(Back {
            copy,
            out_done,
            flat: None,
            users: 0,
            unpacked: HashSet::new(),
            fetches: 0,
        }),
        names: Mutex::default(),
        sizes: t.size(),
    })
}

/// Whether copies between `source` and `target` go through the side
/// stream: from CUDA to the CPU, in a build with the CUDA bridge.
fn side_stream(source: Device, target: Device) -> bool {
    source.is_cuda() && target == Device::Cpu && cuda_copy::side_copies()
}

/// A copy of `t` on `device`, always a new buffer (also when `t` is there
/// already). Without the side stream, copies from or to a CUDA device do
/// not block the host either: from the device they land in pinned host
/// memory, and both directions run in order on the current stream, so a
/// copy back never overtakes its copy out.
// docs/semantics.md, rule O5.
fn transfer(t: &Tensor, device: Device) -> Result<Tensor, String> {
    let non_blocking = t.device().is_cuda() || device.is_cuda();
    t.f_to_device_(device, t.kind(), non_blocking, true)
        .map_err(|e| e.to_string())
}

/// Brings the copy back to `source`, unless it is back already.
// docs/semantics.md, rules O5 and O6.
fn fetch(back: &mut Back, source: Device) -> Result<(), String> {
    if back.flat.is_some() {
        return Ok(());
    }
    let flat = match (&back.out_done, source) {
        (Some(out), Device::Cuda(index)) => {
            let (t, done) =
                cuda_copy::copy_back(&back.copy, index, out).map_err(|e| e.to_string())?;
            (t, Some(done))
        }
        _ => (transfer(&back.copy, source)?, None),
    };
    back.flat = Some(flat);
    back.fetches += 1;
    Ok(())
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
            fetch(&mut back, m.source)?;
            let flat = match &back.flat {
                Some((flat, event)) => {
                    if let Some(event) = event {
                        // The current stream (backward's) waits for the copy.
                        cuda_copy::use_after(flat, event).map_err(|e| e.to_string())?;
                    }
                    flat.shallow_clone()
                }
                None => return Err("remat internal error: an offloaded copy went missing".into()),
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
        if let Some(store) = m.store.upgrade() {
            prefetch_before(&store);
        }
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

/// On the first unpack from `store`, brings back the copies of the live
/// store before it in forward order, the one backward reaches next, so
/// that (on the side stream) its copies run while this region's backward
/// computes.
// docs/semantics.md, rule O6.
fn prefetch_before(store: &Arc<OffloadStore>) {
    if store.prefetched.swap(true, Ordering::AcqRel) {
        return;
    }
    let previous = {
        let order = lock(&ORDER);
        let Some(i) = order
            .iter()
            .position(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(store)))
        else {
            return;
        };
        order[..i].iter().rev().find_map(Weak::upgrade)
    };
    let Some(previous) = previous else { return };
    for m in previous.moved() {
        let mut back = lock(&m.back);
        // Not for a storage whose views are being unpacked already; a
        // failure here surfaces at that storage's own unpack.
        if back.unpacked.is_empty() {
            let _ = fetch(&mut back, m.source);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetches(store: &OffloadStore) -> Vec<usize> {
        store
            .moved()
            .iter()
            .map(|m| lock(&m.back).fetches)
            .collect()
    }

    #[test]
    // docs/semantics.md, rule O6: the first unpack from a region brings
    // back the region before it, once; that region's unpacks then share the
    // prefetched copy, which goes with the last of them.
    fn the_first_unpack_prefetches_the_region_before() {
        let a = OffloadStore::new(Device::Cpu);
        let b = OffloadStore::new(Device::Cpu);
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]);
        let y = Tensor::from_slice(&[5.0f32, 6.0]);
        let xa = a.offload(&x.narrow(0, 1, 2), "saved.0").unwrap();
        let xb = a.offload(&x.narrow(0, 0, 1), "saved.1").unwrap();
        let yb = b.offload(&y, "saved.0").unwrap();
        assert_eq!(a.moved().len(), 1, "two views, one storage");
        assert_eq!((fetches(&a), fetches(&b)), (vec![0], vec![0]));
        assert!(yb.restore().unwrap().equal(&y));
        assert_eq!(
            (fetches(&a), fetches(&b)),
            (vec![1], vec![1]),
            "a prefetched"
        );
        assert!(xa.restore().unwrap().equal(&x.narrow(0, 1, 2)));
        assert!(xb.restore().unwrap().equal(&x.narrow(0, 0, 1)));
        assert_eq!(fetches(&a), vec![1], "the prefetched copy served both");
        assert!(lock(&a.moved()[0].back).flat.is_none());
        // Another backward (a retained graph) brings it back again.
        assert!(xa.restore().unwrap().equal(&x.narrow(0, 1, 2)));
        assert_eq!(fetches(&a), vec![2]);
    }
}
