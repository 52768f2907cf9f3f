//! Memory reports: what a checkpoint keeps for backward, per `Save` region.
//!
//! Invariant: every storage is billed whole and once per report, however
//! many saves and outputs use it.

use crate::bridge::{storage_key, storage_nbytes, StorageKey};
use crate::checkpointing::frame::{self, Phase};
use crate::checkpointing::record::{save_name, SaveRecord, Slot};
use crate::diagnostics::format::human_bytes;
use crate::error::{Error, Result};
use crate::sync::lock;
use std::collections::HashSet;
use std::fmt;
use tch::Kind;

/// One storage a `Save` region keeps.
///
/// ```
/// use remat_runtime::{checkpoint, memory_report, region, Policy};
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
    /// The saves (`saved.<i>`) and outputs (`output.<i>`) that use it.
    pub names: Vec<String>,
    /// The storage's whole size.
    pub bytes: i64,
    /// Shape of the first tensor seen on it.
    pub sizes: Vec<i64>,
    /// Its element type.
    pub kind: Kind,
    /// A note from [`MemoryReport::annotate`] (e.g. where it was allocated).
    pub annotation: Option<String>,
}

/// What one `Save` region keeps.
///
/// ```
/// use remat_runtime::{checkpoint, memory_report, region, Policy};
/// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let _y = checkpoint("block").call(&x, |x| {
///     // `sin` saves its input, which replay reproduces: nothing is kept.
///     let h = region("sin", Policy::Save).call(&x, |x| x.sin());
///     let report = memory_report().unwrap();
///     let sin = &report.regions[0];
///     assert_eq!(sin.region, "block::sin");
///     assert!(sin.location.contains(".rs:"));
///     assert_eq!(sin.rebuilt, ["saved.0"]);
///     assert_eq!((sin.bytes(), sin.offloaded), (0, 0));
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
    /// Saves and outputs handed to saved-tensor hooks (not resident here).
    pub offloaded: usize,
}

impl RegionMemory {
    /// The storages it keeps, one entry each.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, memory_report, region, Policy};
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
    /// use remat_runtime::{checkpoint, memory_report, region, Policy};
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
}

/// What the running checkpoint keeps so far, from [`memory_report`].
///
/// Its `Display` is a table: per region, each storage kept.
///
/// ```
/// use remat_runtime::{checkpoint, memory_report, region, Policy};
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
    /// One entry per `Save` region, in forward order.
    pub regions: Vec<RegionMemory>,
}

impl MemoryReport {
    /// Bytes kept, each storage counted once across regions.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, memory_report, region, Policy};
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
    /// # fn f(mut report: remat_runtime::MemoryReport) {
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
    /// use remat_runtime::{checkpoint, memory_report, region, Policy};
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

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} kept in {} storage(s)",
            self.checkpoint,
            human_bytes(self.total_bytes()),
            self.storage_count()
        )?;
        for r in &self.regions {
            writeln!(
                f,
                "  {} ({}): {}",
                r.region,
                r.location,
                human_bytes(r.bytes())
            )?;
            for s in r.storages() {
                write!(
                    f,
                    "    {:>10}  {}  {:?} {:?}",
                    human_bytes(s.bytes),
                    s.names.join(" = "),
                    s.sizes,
                    s.kind
                )?;
                match &s.annotation {
                    Some(note) => writeln!(f, "  {note}")?,
                    None => writeln!(f)?,
                }
            }
            if !r.rebuilt.is_empty() {
                writeln!(
                    f,
                    "    + {} save(s) rebuilt on replay, not kept: {}",
                    r.rebuilt.len(),
                    r.rebuilt.join(", ")
                )?;
            }
            if r.offloaded > 0 {
                writeln!(
                    f,
                    "    + {} offloaded by saved-tensor hooks, not resident",
                    r.offloaded
                )?;
            }
        }
        Ok(())
    }
}

/// What the running checkpoint's `Save` regions keep so far; call it from
/// inside a checkpoint's forward (e.g. at the end of the closure).
///
/// ```
/// use remat_runtime::{checkpoint, memory_report, region, Policy};
/// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("block").call(&x, |x| {
///     let h = region("exp", Policy::Save).call(&x, |x| (x * 2).exp());
///     let report = memory_report().unwrap();
///     assert_eq!(report.total_bytes(), 64); // exp keeps its 4x4 f32 result
///     h
/// });
/// ```
pub fn memory_report() -> Result<MemoryReport> {
    let state = frame::with_top(|f| match f {
        Some(f) if f.phase == Phase::Forward => Ok(f.state.clone()),
        _ => Err(Error::Checkpoint {
            checkpoint: "<none>".into(),
            message: "memory_report() must be called inside a checkpoint's forward".into(),
        }),
    })?;
    let records = lock(&state.inner).order.clone();
    Ok(MemoryReport {
        checkpoint: state.display_name().to_string(),
        regions: records.iter().map(|r| region_memory(r)).collect(),
    })
}

/// What `record`'s region keeps now: its saves kept as is and its resident
/// persisted outputs, one entry per storage (billed whole).
pub(crate) fn region_memory(record: &SaveRecord) -> RegionMemory {
    let inner = lock(&record.inner);
    let mut storages: Vec<(StorageKey, KeptStorage)> = Vec::new();
    let mut add =
        |key: StorageKey, name: String, bytes: i64, sizes: Vec<i64>, kind: Kind| match storages
            .iter_mut()
            .find(|(k, _)| *k == key)
        {
            Some((_, s)) => s.names.push(name),
            None => storages.push((
                key,
                KeptStorage {
                    names: vec![name],
                    bytes,
                    sizes,
                    kind,
                    annotation: None,
                },
            )),
        };
    for row in &inner.kept {
        if row.storage.is_alive() {
            add(
                row.storage.key(),
                save_name(row.save),
                row.nbytes,
                row.sizes.clone(),
                row.kind,
            );
        }
    }
    let mut offloaded = inner.offloaded;
    for (i, slot) in inner.slots.iter().enumerate() {
        match slot {
            Some(Slot::Resident { value, .. }) => {
                if let Some(key) = storage_key(value) {
                    add(
                        key,
                        format!("output.{i}"),
                        storage_nbytes(value),
                        value.size(),
                        value.kind(),
                    );
                }
            }
            Some(Slot::Packed { .. }) => offloaded += 1,
            _ => {}
        }
    }
    RegionMemory {
        region: record.display(),
        location: format!("{}:{}", record.location.file(), record.location.line()),
        storages,
        rebuilt: inner.recipes.iter().map(|r| save_name(r.save)).collect(),
        offloaded,
    }
}
