//! Building a memory report from what the runtime recorded: the running
//! checkpoint's inputs and each `Save` region's record, grouped into one row
//! per storage, billed whole (docs/semantics.md, rule D3).

use crate::bridge::{storage_data, storage_key, storage_nbytes, StorageKey};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::frame::{self, Phase};
use crate::checkpointing::save_region::record::{Layout, SaveRecord, Slot};
use crate::diagnostics::memory_report::model::{
    InputMemory, KeptStorage, MemoryReport, OffloadedStorage, RegionMemory, StorageView,
};
use crate::error::{Error, Result};
use crate::sync::lock;
use std::collections::HashSet;
use tch::Kind;

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
    let records = state.records().in_order();
    Ok(MemoryReport {
        checkpoint: state.display_name().to_string(),
        inputs: Some(input_memory(&state, &mut HashSet::new())),
        regions: records.iter().map(|r| region_memory(r)).collect(),
    })
}

/// The inputs `state` keeps for replay, skipping storages in `billed` (and
/// adding the ones it counts).
pub(crate) fn input_memory(
    state: &CheckpointState,
    billed: &mut HashSet<StorageKey>,
) -> InputMemory {
    let mut m = InputMemory::default();
    for i in state.inputs().kept() {
        if i.param {
            m.parameters += 1;
        } else if i.offloaded {
            m.hook_packed += 1;
        } else if i.storage.is_alive() && billed.insert(i.storage.key()) {
            m.bytes += i.nbytes;
            m.storages += 1;
        }
    }
    m
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
/// kept outputs, one entry per storage (billed whole); parameters on
/// their own.
pub(crate) fn region_memory(record: &SaveRecord) -> RegionMemory {
    let inner = record.inner();
    let mut values = Vec::new();
    let mut params = Vec::new();
    for row in inner.kept() {
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
    let mut hook_packed = inner.offloaded();
    for (i, out) in inner.outputs().iter().enumerate() {
        // A value kept as its storage is reported as the tensor a replay
        // would serve.
        let stored = match (out.slot(), out.spec()) {
            (Some(Slot::Stored { value, .. }), Some(spec)) => value.tensor(&spec.meta).ok(),
            _ => None,
        };
        match (out.slot(), &stored) {
            (_, Some(value)) | (Some(Slot::Resident { value, .. }), None) => {
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
            (Some(Slot::Packed { .. }), _) => hook_packed += 1,
            // Reported with the store's storages below.
            (Some(Slot::Offloaded(_) | Slot::Failed(_) | Slot::Stored { .. }) | None, _) => {}
        }
    }
    let storages = storage_rows(values);
    let rebuilt: Vec<String> = inner.recipes().iter().map(|r| r.name.to_string()).collect();
    let mut specs = inner.outputs().iter().filter_map(|o| o.spec()).peekable();
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
        && hook_packed == 0
        && offloaded_storages.is_empty();
    RegionMemory {
        region: record.display(),
        location: format!("{}:{}", record.location.file(), record.location.line()),
        storages,
        rebuilt,
        hook_packed,
        offloaded_storages,
        parameters: storage_rows(params).into_iter().map(|(_, s)| s).collect(),
        released,
    }
}
