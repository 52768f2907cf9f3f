//! `Save` regions: run once on the forward with their saves kept; skipped on
//! replay, where their outputs are served (if a consumer asked) or stand in
//! as placeholders.

use crate::bridge::{
    graph_task_id, graph_task_keeps_graph, is_leaf, is_placeholder, placeholder, storage_key,
    storage_nbytes, tensor_version, HookPair, Payload, PlaceholderSpec, StorageKey, WeakStorage,
};
use crate::checkpoint::CheckpointState;
use crate::error::{Error, Result};
use crate::frame;
use crate::holder::lock;
use crate::io::{input_tensors, RegionInputs, RegionOutput};
use crate::nodes::non_leaf;
use crate::report::{KeptStorage, RegionMemory};
use crate::saved_hooks::{SavedTensorKind, SavedTensorsHooks, TensorHooks};
use crate::saved_input::{classify, rebuild, InputInfo, ViewSpec};
use crate::state_hooks::{restore_all, snapshot_all, Snapshots};
use std::any::Any;
use std::collections::HashSet;
use std::panic::Location;
use std::sync::{Arc, Mutex};
use tch::Kind;
use tch::Tensor;

/// What the forward of one `Save` region recorded for its replay.
pub(crate) struct SaveRecord {
    /// The checkpoint's name and the region's: messages and reports show
    /// `checkpoint::region`, formatted only when they need it.
    checkpoint: Option<Arc<str>>,
    name: String,
    /// Where the region was called (the default annotation of reports).
    pub location: &'static Location<'static>,
    inner: Mutex<RecordInner>,
}

/// A save kept as is, for reports.
struct KeptRow {
    /// Index of the save (`saved.<i>`).
    save: usize,
    storage: WeakStorage,
    nbytes: i64,
    sizes: Vec<i64>,
    kind: Kind,
}

struct OutputSpec {
    spec: PlaceholderSpec,
    requires_grad: bool,
}

/// A persisted output.
enum Slot {
    /// A detached alias and its version when kept.
    Resident { value: Tensor, version: u32 },
    /// Packed by the user's saved-tensor hooks (offloaded).
    Packed {
        hooks: TensorHooks,
        payload: Payload,
    },
    /// An unpack that failed while serving under `retain_graph`.
    Failed(String),
}

struct Recipe {
    input: usize,
    view: Option<ViewSpec>,
    /// Index of the save (`saved.<i>`).
    save: usize,
}

#[derive(Default)]
struct RecordInner {
    inputs: Vec<InputInfo>,
    exit_snapshots: Snapshots,
    outputs: Vec<Option<OutputSpec>>,
    slots: Vec<Option<Slot>>,
    recipes: Vec<Recipe>,
    rebuilt: Vec<Option<Tensor>>,
    identity_storages: HashSet<StorageKey>,
    kept: Vec<KeptRow>,
    offloaded: usize,
    unnamed: usize,
    /// The user's hooks at region entry, for persisted outputs, and the
    /// context they captured at region exit.
    output_hooks: Option<TensorHooks>,
    output_context: Option<Arc<dyn Any + Send + Sync>>,
}

/// How reports and messages call the `i`-th save of a region.
fn save_name(i: usize) -> String {
    format!("saved.{i}")
}

impl SaveRecord {
    /// `checkpoint::region`.
    pub(crate) fn display(&self) -> String {
        match &self.checkpoint {
            Some(c) => format!("{c}::{}", self.name),
            None => self.name.clone(),
        }
    }

    fn error(&self, message: impl Into<String>) -> Error {
        Error::Region {
            region: self.display(),
            message: message.into(),
        }
    }

    /// Keeps output `slot` for replay (idempotent).
    pub(crate) fn persist(&self, slot: usize, output: &Tensor) -> Result<()> {
        let mut inner = lock(&self.inner);
        if !matches!(inner.slots.get(slot), Some(None)) {
            return Ok(());
        }
        let value = output.detach();
        let kept = match inner.output_hooks.clone() {
            Some(hooks) => {
                let context = inner.output_context.clone();
                let payload = hooks
                    .pack(value, SavedTensorKind::SaveOutput, context)
                    .map_err(|m| self.error(format!("packing output {slot}: {m}")))?;
                Slot::Packed { hooks, payload }
            }
            None => {
                let version = tensor_version(&value)?;
                Slot::Resident { value, version }
            }
        };
        inner.slots[slot] = Some(kept);
        Ok(())
    }
}

/// What a `Save` region's saves become.
enum Saved {
    /// Packed by the user's saved-tensor hooks.
    User {
        hooks: TensorHooks,
        payload: Payload,
    },
    /// Rebuilt from a replayed input.
    Rebuilt {
        record: Arc<SaveRecord>,
        slot: usize,
    },
    /// Kept as is (a detached alias), with the version it had.
    Kept {
        value: Tensor,
        version: u32,
        save: usize,
        region: Arc<SaveRecord>,
    },
}

/// The hook a `Save` body runs under: it shadows the checkpoint's holders.
struct SaveHooks(Arc<SaveRecord>);

impl HookPair for SaveHooks {
    fn pack(&self, tensor: Tensor) -> std::result::Result<Payload, String> {
        let record = &self.0;
        let mut inner = lock(&record.inner);
        let save = inner.unnamed;
        inner.unnamed += 1;
        if let Some((input, view)) = classify(&tensor, &inner.inputs) {
            let slot = inner.recipes.len();
            inner.recipes.push(Recipe { input, view, save });
            inner.rebuilt.push(None);
            return Ok(Box::new(Saved::Rebuilt {
                record: record.clone(),
                slot,
            }));
        }
        drop(inner);
        if let Some(hooks) = frame::user_hooks() {
            let context = hooks.capture();
            let payload = hooks.pack(tensor, SavedTensorKind::Backward, context)?;
            lock(&record.inner).offloaded += 1;
            return Ok(Box::new(Saved::User { hooks, payload }));
        }
        let mut inner = lock(&record.inner);
        if let Some(key) = storage_key(&tensor) {
            inner.identity_storages.insert(key);
        }
        if let Some(storage) = WeakStorage::new(&tensor) {
            inner.kept.push(KeptRow {
                save,
                storage,
                nbytes: storage_nbytes(&tensor),
                sizes: tensor.size(),
                kind: tensor.kind(),
            });
        }
        let version = tensor_version(&tensor).map_err(|e| e.to_string())?;
        Ok(Box::new(Saved::Kept {
            value: tensor,
            version,
            save,
            region: record.clone(),
        }))
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> std::result::Result<Tensor, String> {
        match payload.downcast_ref::<Saved>() {
            Some(Saved::Rebuilt { record, slot }) => {
                let inner = lock(&record.inner);
                match inner.rebuilt.get(*slot) {
                    Some(Some(t)) => Ok(t.shallow_clone()),
                    _ => Err(record
                        .error(format!(
                            "its saved input `{}` was not rebuilt by a replay; forward and \
                             replay followed different code paths",
                            save_name(inner.recipes[*slot].save)
                        ))
                        .to_string()),
                }
            }
            Some(Saved::Kept {
                value,
                version,
                save,
                region,
            }) => {
                let name = save_name(*save);
                let now = tensor_version(value).map_err(|e| e.to_string())?;
                if now != *version {
                    return Err(region
                        .error(format!(
                            "saved tensor `{name}` was modified in place after it was saved \
                             (version {version}, now {now}); clone it before modifying it"
                        ))
                        .to_string());
                }
                Ok(value.shallow_clone())
            }
            Some(Saved::User { hooks, payload }) => hooks.unpack(&**payload),
            None => Err("remat internal error: foreign payload in a Save region".into()),
        }
    }
}

/// Runs a `Save` region on the forward.
pub(crate) fn forward<I: RegionInputs, O: RegionOutput>(
    state: &Arc<CheckpointState>,
    name: &str,
    location: &'static Location<'static>,
    inputs: I,
    body: impl FnOnce(I) -> O,
) -> Result<O> {
    let infos = {
        let inner = lock(&state.inner);
        input_tensors(&inputs)
            .iter()
            .enumerate()
            .filter_map(|(i, t)| InputInfo::new(i, t, inner.persist.contains(t)))
            .collect()
    };
    let output_hooks = frame::user_hooks();
    let record = Arc::new(SaveRecord {
        checkpoint: state.name.clone(),
        name: name.to_string(),
        location,
        inner: Mutex::new(RecordInner {
            inputs: infos,
            output_hooks: output_hooks.clone(),
            ..RecordInner::default()
        }),
    });
    {
        let mut inner = lock(&state.inner);
        inner.records.insert(name.to_string(), record.clone());
        inner.order.push(record.clone());
    }
    let out = {
        let _hooks = SavedTensorsHooks::push(Some(Arc::new(SaveHooks(record.clone()))));
        let _save = frame::enter_save_body();
        body(inputs)
    };
    let exit = snapshot_all(&state.state_hooks);
    let output_context = output_hooks.as_ref().and_then(TensorHooks::capture);
    let parts = out.into_parts();
    reject_grad_leaves(|| record.display(), &parts)?;
    let eager: Vec<usize> = {
        let mut inner = lock(&record.inner);
        inner.exit_snapshots = exit;
        inner.output_context = output_context;
        inner.inputs.clear();
        inner.outputs = parts
            .iter()
            .map(|p| {
                p.as_ref().map(|t| OutputSpec {
                    spec: PlaceholderSpec::of(t),
                    requires_grad: t.requires_grad(),
                })
            })
            .collect();
        inner.slots = parts.iter().map(|_| None).collect();
        // An output sharing storage with a kept save is resident anyway.
        parts
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.as_ref()
                    .and_then(storage_key)
                    .is_some_and(|k| inner.identity_storages.contains(&k))
            })
            .map(|(i, _)| i)
            .collect()
    };
    {
        let mut inner = lock(&state.inner);
        for (i, t) in parts.iter().enumerate() {
            if let Some(t) = t {
                inner.persist.register(&record, i, t);
            }
        }
    }
    for i in eager {
        if let Some(t) = &parts[i] {
            record.persist(i, t)?;
        }
    }
    O::from_parts(parts)
}

/// A `Save` region reached on replay: its body is skipped.
pub(crate) fn replay<I: RegionInputs, O: RegionOutput>(
    state: &Arc<CheckpointState>,
    name: &str,
    inputs: I,
) -> Result<O> {
    let record = lock(&state.inner)
        .records
        .get(name)
        .cloned()
        .ok_or_else(|| Error::Region {
            region: state.region_display(name),
            message: "replay reached this `save` region but the forward did not record it; \
                  forward and replay followed different code paths (or the region's policy \
                  differs between them)"
                .into(),
        })?;
    let mut inner = lock(&record.inner);
    restore_all(&state.state_hooks, &inner.exit_snapshots);
    if !inner.recipes.is_empty() {
        let replayed = input_tensors(&inputs);
        for slot in 0..inner.recipes.len() {
            let recipe = &inner.recipes[slot];
            let base = replayed.get(recipe.input).ok_or_else(|| {
                record.error("replay passed it fewer tensor inputs than the forward did; forward and replay followed different code paths")
            })?;
            if is_placeholder(base) {
                return Err(record.error(format!(
                    "it saved an input (`{}`) for backward that replay was expected to \
                     reproduce, but that input replays as a placeholder: it is bare code's \
                     view or result of an upstream `save` region's output. Make that \
                     producer a `recompute` region, or pass its output to this region directly",
                    save_name(recipe.save)
                )));
            }
            let value = rebuild(base, &recipe.view).map_err(|m| record.error(m))?;
            inner.rebuilt[slot] = Some(value);
        }
    }
    let pop = graph_task_id().is_some() && !graph_task_keeps_graph();
    let mut served = Vec::with_capacity(inner.outputs.len());
    for i in 0..inner.outputs.len() {
        let Some(out) = &inner.outputs[i] else {
            served.push(None);
            continue;
        };
        let (spec, requires_grad) = (out.spec.clone(), out.requires_grad);
        let slot = if pop {
            inner.slots[i].take()
        } else {
            inner.slots[i].as_ref().map(|s| match s {
                Slot::Resident { value, version } => Slot::Resident {
                    value: value.shallow_clone(),
                    version: *version,
                },
                // Unpacking does not consume the payload: unpack now.
                Slot::Packed { hooks, payload } => match hooks.unpack(&**payload) {
                    Ok(value) => Slot::Resident {
                        version: tensor_version(&value).unwrap_or(0),
                        value,
                    },
                    Err(m) => Slot::Failed(m),
                },
                Slot::Failed(m) => Slot::Failed(m.clone()),
            })
        };
        served.push(Some((i, spec, requires_grad, slot)));
    }
    let n_outputs = inner.outputs.len();
    drop(inner);
    let mut parts = Vec::with_capacity(served.len());
    for entry in served {
        let Some((i, spec, requires_grad, slot)) = entry else {
            parts.push(None);
            continue;
        };
        let value = match slot {
            Some(Slot::Resident { value, version }) => {
                let now = tensor_version(&value)?;
                if now != version {
                    return Err(record.error(format!(
                        "output {i} was modified in place after it was kept for replay; \
                         clone it before modifying it"
                    )));
                }
                value.detach()
            }
            Some(Slot::Packed { hooks, payload }) => hooks
                .unpack(&*payload)
                .map_err(|m| record.error(format!("unpacking output {i}: {m}")))?,
            Some(Slot::Failed(m)) => return Err(record.error(format!("unpacking output {i}: {m}"))),
            None => placeholder(&spec, &placeholder_message(&record, i, n_outputs))?,
        };
        parts.push(Some(if requires_grad {
            non_leaf(&value)?
        } else {
            value
        }));
    }
    O::from_parts(parts)
}

fn placeholder_message(record: &SaveRecord, slot: usize, n_outputs: usize) -> String {
    let source = if n_outputs == 1 {
        format!("{}.out", record.display())
    } else {
        format!("{}.{slot}", record.display())
    };
    format!(
        "`{source}` is a placeholder: region `{region}` is a `save` region, so replay skips \
         it and serves only the outputs that some replayed code asked to keep; code that \
         replays read this one's data without asking. Fix: call \
         `recompute_needs_tensor(&t)` on it right before the bare code that reads it (`needs \
         t;` in `remat!`), or pass it to a `recompute` region, which asks automatically.",
        region = record.display()
    )
}

/// A region must return computed values, not fresh leaves requiring grad.
pub(crate) fn reject_grad_leaves(
    display: impl Fn() -> String,
    parts: &[Option<Tensor>],
) -> Result<()> {
    for (i, t) in parts.iter().enumerate() {
        if let Some(t) = t {
            if t.requires_grad() && is_leaf(t) {
                return Err(Error::Region {
                    region: display(),
                    message: format!(
                        "output {i} is a leaf tensor that requires grad (an allocation, not a \
                         computation); create it outside the checkpoint, or do not wrap that \
                         code in a region"
                    ),
                });
            }
        }
    }
    Ok(())
}

impl SaveRecord {
    /// What this region keeps now: its saves kept as is and its resident
    /// persisted outputs, one entry per storage (billed whole).
    pub(crate) fn memory(&self) -> RegionMemory {
        let inner = lock(&self.inner);
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
            region: self.display(),
            location: format!("{}:{}", self.location.file(), self.location.line()),
            storages,
            rebuilt: inner.recipes.iter().map(|r| save_name(r.save)).collect(),
            offloaded,
        }
    }
}
