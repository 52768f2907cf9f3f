//! What a memory report holds: the storages each `Save` region keeps, what
//! it moved off its device or left to others, and the checkpoint's inputs;
//! the sums over them.
//!
//! Invariant: every storage is billed whole and once per report, however
//! many saves and outputs use it (docs/semantics.md, rule D3; names D2).

use crate::bridge::StorageKey;
use std::collections::HashSet;
use tch::Kind;

/// One storage a `Save` region keeps.
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
/// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let _y = checkpoint("block").call(&x, |x| {
///     let h = region("exp", Policy::Save).call(&x, |x| x.exp());
///     let report = memory_report().unwrap();
///     let kept = report.regions[0].storages().next().unwrap();
///     // `exp` saves its result for backward, which is also its output.
///     assert_eq!(kept.names, ["saved.0", "output.0"]);
///     assert_eq!((kept.bytes, kept.sizes.as_slice()), (64, &[4, 4][..]));
///     assert_eq!(kept.kind, tch::Kind::Float);
///     h
/// });
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct KeptStorage {
    /// The saves (their `save_for_backward` names, or `saved.<i>`) and
    /// outputs (`output.<i>`) that are this storage's main tensor: aliases
    /// with one shape and layout.
    pub names: Vec<String>,
    /// The storage's whole size (all of it stays resident).
    pub bytes: i64,
    /// Shape of the main tensor.
    pub sizes: Vec<i64>,
    /// Its element type.
    pub kind: Kind,
    /// Bytes of the storage that the kept tensors cover (less than `bytes`
    /// when only part of a larger storage is kept).
    pub held: i64,
    /// Kept tensors of other shapes or layouts on the same storage.
    pub views: Vec<StorageView>,
    /// A note from [`MemoryReport::annotate`] (e.g. where it was allocated).
    pub annotation: Option<String>,
    /// Where the storage's data is (finds its allocation in the CUDA
    /// allocator's snapshot).
    pub(crate) address: usize,
}

/// One storage an `Offload` region copied to its target: it holds no memory
/// on its own device until backward brings it back.
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
/// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let _y = checkpoint("block").call(&x, |x| {
///     let h = region("exp", Policy::OFFLOAD).call(&x, |x| x.exp());
///     let report = memory_report().unwrap();
///     let moved = &report.regions[0].offloaded_storages[0];
///     assert_eq!(moved.names, ["saved.0", "output.0"]);
///     assert_eq!((moved.bytes, moved.target), (64, tch::Device::Cpu));
///     h
/// });
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct OffloadedStorage {
    /// The saves and outputs copied with it.
    pub names: Vec<String>,
    /// The storage's whole size (all of it is copied).
    pub bytes: i64,
    /// Shape of the first tensor copied with it.
    pub sizes: Vec<i64>,
    /// Its element type.
    pub kind: Kind,
    /// Where the copy is.
    pub target: tch::Device,
}

/// A kept tensor that views a [`KeptStorage`] with another shape or layout.
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
/// let x = tch::Tensor::ones([4, 6], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let _y = checkpoint("block").call(&x, |x| {
///     // `exp` keeps its result; `tanh` saves a transposed view of it as its output.
///     let h = region("exp_t", Policy::Save).call(&x, |x| x.exp().tr().tanh());
///     let report = memory_report().unwrap();
///     assert!(report.regions[0].storages().count() >= 1);
///     h
/// });
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct StorageView {
    /// The saves and outputs with this layout.
    pub names: Vec<String>,
    /// Its shape.
    pub sizes: Vec<i64>,
    /// Bytes of the storage it spans.
    pub spans: i64,
}

/// What one `Save` region keeps.
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
/// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let _y = checkpoint("block").call(&x, |x| {
///     // `sin` saves its input, which replay reproduces: nothing is kept.
///     let h = region("sin", Policy::Save).call(&x, |x| x.sin());
///     let report = memory_report().unwrap();
///     let sin = &report.regions[0];
///     assert_eq!(sin.region, "block::sin");
///     assert!(sin.location.contains(".rs:"));
///     assert_eq!(sin.rebuilt, ["saved.0"]);
///     assert_eq!((sin.bytes(), sin.hook_packed), (0, 0));
///     h
/// });
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RegionMemory {
    /// `checkpoint::region`.
    pub region: String,
    /// Where the region was called (`file:line`).
    pub location: String,
    pub(crate) storages: Vec<(StorageKey, KeptStorage)>,
    /// Saves that replay rebuilds from its inputs instead of keeping.
    pub rebuilt: Vec<String>,
    /// Saves and outputs packed by saved-tensor hooks (not resident here;
    /// apart from what an `Offload` region moves, in `offloaded_storages`).
    pub hook_packed: usize,
    /// What an `Offload` region copied to its target (not resident on its
    /// own device), one entry per storage; not in [`RegionMemory::bytes`].
    pub offloaded_storages: Vec<OffloadedStorage>,
    /// Parameters (and views of them) its ops saved: resident, but not
    /// activation memory, so not counted in its bytes.
    pub parameters: Vec<KeptStorage>,
    /// Its outputs are all gone and so is everything it kept: it shows 0 B
    /// because its saves were already released.
    pub released: bool,
}

impl RegionMemory {
    /// The storages it keeps, one entry each.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let _y = checkpoint("block").call(&x, |x| {
    ///     // `mul` saves both factors: `exp(x)` is kept, `x` is rebuilt on replay.
    ///     let h = region("mul", Policy::Save).call(&x, |x| x.exp() * x);
    ///     let report = memory_report().unwrap();
    ///     assert_eq!(report.regions[0].storages().count(), 1);
    ///     assert_eq!(report.regions[0].rebuilt.len(), 1);
    ///     h
    /// });
    /// ```
    pub fn storages(&self) -> impl Iterator<Item = &KeptStorage> {
        self.storages.iter().map(|(_, s)| s)
    }

    /// Bytes of all storages it keeps.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let _y = checkpoint("block").call(&x, |x| {
    ///     let h = region("exp", Policy::Save).call(&x, |x| x.exp()); // keeps its result
    ///     assert_eq!(memory_report().unwrap().regions[0].bytes(), 16 * 4);
    ///     h
    /// });
    /// ```
    pub fn bytes(&self) -> i64 {
        self.storages().map(|s| s.bytes).sum()
    }

    /// Bytes an `Offload` region copied to its target.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let _y = checkpoint("block").call(&x, |x| {
    ///     let h = region("exp", Policy::Save).call(&x, |x| x.exp());
    ///     assert_eq!(memory_report().unwrap().regions[0].offloaded_bytes(), 0); // kept
    ///     h
    /// });
    /// ```
    pub fn offloaded_bytes(&self) -> i64 {
        self.offloaded_storages.iter().map(|s| s.bytes).sum()
    }
}

/// What the running checkpoint keeps so far, from
/// [`memory_report`](fn@crate::diagnostics::memory_report).
///
/// Its `Display` is a table: per region, each storage kept.
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
/// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let _y = checkpoint("block").call(&x, |x| {
///     let h = region("exp", Policy::Save).call(&x, |x| x.exp());
///     let report = memory_report().unwrap();
///     assert_eq!(report.checkpoint, "block");
///     assert_eq!(report.regions.len(), 1);
///     assert!(report.to_string().starts_with("block: 64 B kept in 1 storage(s)"));
///     h
/// });
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryReport {
    /// The checkpoint's name.
    pub checkpoint: String,
    /// Its inputs, kept for replay (not counted in [`MemoryReport::total_bytes`]).
    pub inputs: Option<InputMemory>,
    /// One entry per `Save` region, in forward order.
    pub regions: Vec<RegionMemory>,
}

/// What a checkpoint keeps of its inputs so that replay can run.
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
/// let w = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let x = &w * 2; // an activation: kept for replay
/// let _y = checkpoint("block").call((&x, &w), |(x, w)| {
///     let inputs = memory_report().unwrap().inputs.unwrap();
///     assert_eq!((inputs.bytes, inputs.storages, inputs.parameters), (16, 1, 1));
///     region("mul", Policy::Recompute).call((&x, &w), |(x, w)| x * w)
/// });
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputMemory {
    /// Bytes of the input storages kept as is (each storage once).
    pub bytes: i64,
    /// How many storages that is.
    pub storages: usize,
    /// Inputs packed by saved-tensor hooks instead.
    pub hook_packed: usize,
    /// Inputs that are parameters (or views of one): not counted.
    pub parameters: usize,
}

impl MemoryReport {
    /// Bytes kept, each storage counted once across regions.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let _y = checkpoint("block").call(&x, |x| {
    ///     let h = region("exp", Policy::Save).call(&x, |x| x.exp());
    ///     // `sin` saves `h` too: it cannot be rebuilt, since `exp` does not replay.
    ///     let g = region("sin", Policy::Save).call(&h, |h| h.sin());
    ///     let report = memory_report().unwrap();
    ///     assert_eq!((report.regions[0].bytes(), report.regions[1].bytes()), (64, 64));
    ///     assert_eq!(report.total_bytes(), 64); // one storage, counted once
    ///     g
    /// });
    /// ```
    pub fn total_bytes(&self) -> i64 {
        let mut seen = HashSet::new();
        self.regions
            .iter()
            .flat_map(|r| r.storages.iter())
            .filter(|(k, _)| seen.insert(*k))
            .map(|(_, s)| s.bytes)
            .sum()
    }

    /// Adds a note to each storage row, shown after it (the region's call
    /// site is always shown on the region's line).
    ///
    /// ```
    /// # fn f(mut report: remat_runtime::diagnostics::MemoryReport) {
    /// report.annotate(|region, row| Some(format!("{} x{}", region.location, row.names.len())));
    /// # }
    /// ```
    pub fn annotate(&mut self, f: impl Fn(&RegionMemory, &KeptStorage) -> Option<String>) {
        for r in &mut self.regions {
            let notes: Vec<_> = r.storages().map(|s| f(r, s)).collect();
            for ((_, s), note) in r.storages.iter_mut().zip(notes) {
                s.annotation = note;
            }
        }
    }

    /// How many distinct storages are kept.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let _y = checkpoint("block").call(&x, |x| {
    ///     let h = region("exp", Policy::Save).call(&x, |x| x.exp());
    ///     let g = region("sin", Policy::Save).call(&h, |h| h.sin()); // saves `h` again
    ///     assert_eq!(memory_report().unwrap().storage_count(), 1);
    ///     g
    /// });
    /// ```
    pub fn storage_count(&self) -> usize {
        let keys: HashSet<_> = self
            .regions
            .iter()
            .flat_map(|r| r.storages.iter().map(|(k, _)| *k))
            .collect();
        keys.len()
    }
}
