//! Memory reports: what a checkpoint keeps for backward, per `Save` region.
//!
//! Invariant: every storage is billed whole and once per report, however
//! many saves and outputs use it (docs/semantics.md, rule D3; names D2).

use crate::bridge::{storage_data, storage_key, storage_nbytes, StorageKey};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::frame::{self, Phase};
use crate::checkpointing::save_region::record::{Layout, SaveRecord, Slot};
use crate::diagnostics::device::name_of;
use crate::diagnostics::format::human_bytes;
use crate::error::{Error, Result};
use crate::sync::lock;
use std::collections::HashSet;
use std::fmt;
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

/// What the running checkpoint keeps so far, from [`memory_report`].
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
    /// Inputs handed to saved-tensor hooks instead.
    pub offloaded: usize,
    /// Inputs that are parameters (or views of one): not counted.
    pub parameters: usize,
}

/// The inputs `state` keeps for replay, skipping storages in `billed` (and
/// adding the ones it counts).
pub(crate) fn input_memory(
    state: &CheckpointState,
    billed: &mut HashSet<StorageKey>,
) -> InputMemory {
    let mut m = InputMemory::default();
    for i in &state.inputs {
        if i.param {
            m.parameters += 1;
        } else if i.offloaded {
            m.offloaded += 1;
        } else if i.storage.is_alive() && billed.insert(i.storage.key()) {
            m.bytes += i.nbytes;
            m.storages += 1;
        }
    }
    m
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

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} kept in {} storage(s)",
            self.checkpoint,
            human_bytes(self.total_bytes()),
            self.storage_count()
        )?;
        if let Some(inputs) = &self.inputs {
            write_inputs(f, "  ", inputs)?;
        }
        for r in &self.regions {
            write_region(f, r, "  ")?;
        }
        Ok(())
    }
}

/// The checkpoint-inputs line of a report.
pub(crate) fn write_inputs(f: &mut fmt::Formatter<'_>, pad: &str, i: &InputMemory) -> fmt::Result {
    write!(
        f,
        "{pad}inputs kept for replay: {} in {} storage(s)",
        human_bytes(i.bytes),
        i.storages
    )?;
    if i.offloaded > 0 {
        write!(f, ", {} offloaded by saved-tensor hooks", i.offloaded)?;
    }
    if i.parameters > 0 {
        write!(
            f,
            ", {} leaf input(s) requiring grad (parameters) not counted",
            i.parameters
        )?;
    }
    writeln!(f)
}

/// One region of a memory report: its line, its storages with their views,
/// its parameters and its footers.
pub(crate) fn write_region(f: &mut fmt::Formatter<'_>, r: &RegionMemory, pad: &str) -> fmt::Result {
    write!(
        f,
        "{pad}{} ({}): {}",
        r.region,
        r.location,
        human_bytes(r.bytes())
    )?;
    if r.released {
        write!(
            f,
            "  ! output no longer alive: its saves were already released"
        )?;
    }
    writeln!(f)?;
    let rows = |f: &mut fmt::Formatter<'_>, storages: &mut dyn Iterator<Item = &KeptStorage>| {
        for s in storages {
            write!(
                f,
                "{pad}  {:>10}  {}  {:?} {:?}",
                human_bytes(s.bytes),
                s.names.join(" = "),
                s.sizes,
                s.kind
            )?;
            if s.held < s.bytes {
                write!(
                    f,
                    "  holds {} of {}",
                    human_bytes(s.held),
                    human_bytes(s.bytes)
                )?;
            }
            match &s.annotation {
                Some(note) => writeln!(f, "  {note}")?,
                None => writeln!(f)?,
            }
            for v in &s.views {
                writeln!(
                    f,
                    "{pad}  {:>10}  - {}  view {:?}  spans {}",
                    "",
                    v.names.join(" = "),
                    v.sizes,
                    human_bytes(v.spans)
                )?;
            }
        }
        Ok(())
    };
    rows(f, &mut r.storages())?;
    if !r.parameters.is_empty() {
        writeln!(
            f,
            "{pad}  + {} parameter storage(s) saved, not activation memory ({}):",
            r.parameters.len(),
            human_bytes(r.parameters.iter().map(|p| p.bytes).sum())
        )?;
        let inner = format!("{pad}  ");
        let _ = &inner;
        rows(f, &mut r.parameters.iter())?;
    }
    if !r.rebuilt.is_empty() {
        writeln!(
            f,
            "{pad}  + {} save(s) rebuilt on replay, not kept: {}",
            r.rebuilt.len(),
            r.rebuilt.join(", ")
        )?;
    }
    if r.offloaded > 0 {
        writeln!(
            f,
            "{pad}  + {} offloaded by saved-tensor hooks, not resident",
            r.offloaded
        )?;
    }
    for s in &r.offloaded_storages {
        writeln!(
            f,
            "{pad}  + {:>8}  {}  {:?} {:?}  offloaded to {}, not resident",
            human_bytes(s.bytes),
            s.names.join(" = "),
            s.sizes,
            s.kind,
            name_of(s.target)
        )?;
    }
    Ok(())
}

/// What the running checkpoint's `Save` regions keep so far; call it from
/// inside a checkpoint's forward (e.g. at the end of the closure).
///
/// ```
/// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
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
        inputs: Some(input_memory(&state, &mut HashSet::new())),
        regions: records.iter().map(|r| region_memory(r)).collect(),
    })
}

/// A tensor a report shows: its name, storage and layout.
struct Value {
    key: StorageKey,
    address: usize,
    name: String,
    nbytes: i64,
    layout: Layout,
    kind: Kind,
}

/// One row per storage: the tensors with its first full-covering layout (or
/// the first layout) as aliases, the other layouts as views.
fn storage_rows(values: Vec<Value>) -> Vec<(StorageKey, KeptStorage)> {
    let mut by_storage: Vec<(StorageKey, Vec<Value>)> = Vec::new();
    for v in values {
        match by_storage.iter_mut().find(|(k, _)| *k == v.key) {
            Some((_, vs)) => vs.push(v),
            None => by_storage.push((v.key, vec![v])),
        }
    }
    by_storage
        .into_iter()
        .map(|(key, values)| {
            let (nbytes, address) = (values[0].nbytes, values[0].address);
            // Aliases: the same layout (dtype is not compared, as the reference).
            let mut layouts: Vec<(Layout, Kind, Vec<String>)> = Vec::new();
            for v in values {
                match layouts.iter_mut().find(|(l, _, _)| *l == v.layout) {
                    Some((_, _, names)) => names.push(v.name),
                    None => layouts.push((v.layout, v.kind, vec![v.name])),
                }
            }
            let main = layouts
                .iter()
                .position(|(l, _, _)| l.span() == (0, nbytes))
                .unwrap_or(0);
            let (layout, kind, names) = layouts.remove(main);
            let mut spans = vec![layout.span()];
            let views = layouts
                .into_iter()
                .map(|(l, _, names)| {
                    let (a, b) = l.span();
                    spans.push((a, b));
                    StorageView {
                        names,
                        sizes: l.sizes().to_vec(),
                        spans: b - a,
                    }
                })
                .collect();
            (
                key,
                KeptStorage {
                    names,
                    bytes: nbytes,
                    sizes: layout.sizes().to_vec(),
                    kind,
                    held: covered(spans, nbytes),
                    views,
                    annotation: None,
                    address,
                },
            )
        })
        .collect()
}

/// Bytes of `[0, nbytes)` covered by the union of `spans`.
fn covered(mut spans: Vec<(i64, i64)>, nbytes: i64) -> i64 {
    spans.sort_unstable();
    let (mut total, mut reach) = (0, 0);
    for (a, b) in spans {
        let (a, b) = (a.clamp(0, nbytes).max(reach), b.clamp(0, nbytes));
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    total
}

/// What `record`'s region keeps now: its saves kept as is and its resident
/// persisted outputs, one entry per storage (billed whole); parameters on
/// their own.
pub(crate) fn region_memory(record: &SaveRecord) -> RegionMemory {
    let inner = lock(&record.inner);
    let mut values = Vec::new();
    let mut params = Vec::new();
    for row in &inner.kept {
        if row.storage.is_alive() {
            let v = Value {
                key: row.storage.key(),
                address: row.address,
                name: row.name.to_string(),
                nbytes: row.nbytes,
                layout: row.layout.clone(),
                kind: row.kind,
            };
            if row.param {
                params.push(v);
            } else {
                values.push(v);
            }
        }
    }
    let mut offloaded = inner.offloaded;
    for (i, slot) in inner.outputs.iter().map(|o| &o.slot).enumerate() {
        match slot {
            Some(Slot::Resident { value, .. }) => {
                if let Some(key) = storage_key(value) {
                    values.push(Value {
                        key,
                        address: storage_data(value),
                        name: format!("output.{i}"),
                        nbytes: storage_nbytes(value),
                        layout: Layout::of(value),
                        kind: value.kind(),
                    });
                }
            }
            Some(Slot::Packed { .. }) => offloaded += 1,
            // Reported with the store's storages below.
            Some(Slot::Offloaded(_)) | Some(Slot::Failed(_)) | None => {}
        }
    }
    let storages = storage_rows(values);
    let rebuilt: Vec<String> = inner.recipes.iter().map(|r| r.name.to_string()).collect();
    let mut specs = inner
        .outputs
        .iter()
        .filter_map(|o| o.spec.as_ref())
        .peekable();
    let outputs_gone =
        specs.peek().is_some() && specs.all(|o| o.storage.as_ref().is_none_or(|s| !s.is_alive()));
    // docs/semantics.md, rule O1: what moved, apart from what is kept.
    let offloaded_storages: Vec<OffloadedStorage> = record
        .offload
        .iter()
        .flat_map(|store| store.moved())
        .map(|m| OffloadedStorage {
            names: lock(&m.names).clone(),
            bytes: m.nbytes,
            sizes: m.sizes.clone(),
            kind: m.kind(),
            target: m.target(),
        })
        .collect();
    let released = outputs_gone
        && storages.is_empty()
        && rebuilt.is_empty()
        && offloaded == 0
        && offloaded_storages.is_empty();
    RegionMemory {
        region: record.display(),
        location: format!("{}:{}", record.location.file(), record.location.line()),
        storages,
        rebuilt,
        offloaded,
        offloaded_storages,
        parameters: storage_rows(params).into_iter().map(|(_, s)| s).collect(),
        released,
    }
}
