//! `Save` regions: run once on the forward with their saves kept; skipped on
//! replay, where their outputs are served (if a consumer asked) or stand in
//! as placeholders.
//!
//! Invariant: on the forward the body runs with its `SaveRecord` as its
//! frame's save pack, so the checkpoint's forward hook hands every save of the body
//! to it and nothing the body saves becomes a holder; on replay the body
//! never runs.

use crate::bridge::{
    detached_alias, graph_task_id, graph_task_keeps_graph, is_grad_leaf, is_placeholder,
    placeholder, storage_data, storage_key, storage_nbytes, tensor_version, HookPair, Payload,
    PlaceholderSpec, SaveSite, TensorMeta, WeakStorage,
};
use crate::checkpointing::frame;
use crate::checkpointing::nodes::non_leaf;
use crate::checkpointing::record::{
    save_name, KeptRow, Layout, Output, OutputSpec, Recipe, RecordInner, SaveRecord, Slot,
};
use crate::checkpointing::saved_input::{classify, rebuild, InputInfo};
use crate::checkpointing::state::CheckpointState;
use crate::error::{Error, Result};
use crate::hooks::save_names;
use crate::hooks::saved_tensors::SavedTensorsHooks;
use crate::hooks::state::{restore_all, snapshot_all};
use crate::hooks::tensor_hooks::{SavedTensorKind, TensorHooks};
use crate::io::{input_tensors, RegionInputs, RegionOutput};
use crate::sync::lock;
use std::any::Any;
use std::borrow::Cow;
use std::panic::Location;
use std::sync::{Arc, Mutex};
use tch::Tensor;

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
        name: String,
        region: Arc<SaveRecord>,
    },
}

/// A record packs its `Save` body's saves (instead of the checkpoint's
/// holders).
impl HookPair for SaveRecord {
    fn pack(&self, tensor: Tensor) -> std::result::Result<Payload, String> {
        self.pack_saved(tensor, SaveSite::default())
    }

    fn pack_saved(&self, tensor: Tensor, site: SaveSite) -> std::result::Result<Payload, String> {
        // Packing happens while the body runs, when the region holds the
        // record: it is alive.
        let record = &self
            .me
            .upgrade()
            .ok_or("remat internal error: a Save region's record packed after it was freed")?;
        let mut inner = lock(&record.inner);
        // A name given to `save_for_backward`, or the next `saved.<i>`.
        let name = save_names::next().unwrap_or_else(|| {
            inner.unnamed += 1;
            save_name(inner.unnamed - 1)
        });
        if let Some((input, view)) = classify(&tensor, &inner.inputs) {
            let slot = inner.recipes.len();
            inner.recipes.push(Recipe { input, view, name });
            inner.rebuilt.push(None);
            return Ok(Box::new(Saved::Rebuilt {
                record: record.clone(),
                slot,
            }));
        }
        drop(inner);
        if let Some(hooks) = frame::user_hooks() {
            let context = hooks.capture();
            let payload = hooks.pack(tensor, SavedTensorKind::Backward, context, site.param)?;
            lock(&record.inner).offloaded += 1;
            return Ok(Box::new(Saved::User { hooks, payload }));
        }
        let mut inner = lock(&record.inner);
        if let Some(key) = storage_key(&tensor) {
            if !site.param {
                inner.identity_storages.insert(key);
            }
        }
        if let Some(storage) = WeakStorage::new(&tensor) {
            inner.kept.push(KeptRow {
                name: name.clone(),
                storage,
                nbytes: storage_nbytes(&tensor),
                layout: Layout::of(&tensor),
                kind: tensor.kind(),
                param: site.param,
                address: storage_data(&tensor),
            });
        }
        let version = tensor_version(&tensor).map_err(|e| e.to_string())?;
        Ok(Box::new(Saved::Kept {
            value: tensor,
            version,
            name,
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
                            inner.recipes[*slot].name
                        ))
                        .to_string()),
                }
            }
            Some(Saved::Kept {
                value,
                version,
                name,
                region,
            }) => {
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
    name: Cow<'static, str>,
    location: &'static Location<'static>,
    inputs: I,
    body: impl FnOnce(I) -> O,
) -> Result<O> {
    let infos = {
        let persist = lock(&state.persist);
        // Visited in place: no handle is cloned per input.
        let (mut infos, mut index) = (Vec::new(), 0);
        inputs.visit_tensors(&mut |t| {
            infos.extend(InputInfo::new(index, t, persist.contains(t)));
            index += 1;
        });
        infos
    };
    let output_hooks = frame::user_hooks();
    let record = Arc::new_cyclic(|me| SaveRecord {
        me: me.clone(),
        checkpoint: state.name.clone(),
        name: name.clone(),
        location,
        inner: Mutex::new(RecordInner {
            inputs: infos,
            output_hooks: output_hooks.clone(),
            ..RecordInner::default()
        }),
    });
    {
        let mut inner = lock(&state.inner);
        inner.records.insert(name, record.clone());
        inner.order.push(record.clone());
    }
    let out = {
        let pack: Arc<dyn HookPair> = record.clone();
        // Usually the checkpoint's hook is on top and hands the body's saves
        // to `pack`; under hooks pushed inside the checkpoint (a tracker, a
        // disabled level), `pack` goes on top natively, shadowing them.
        let _hooks =
            (!frame::own_hook_on_top()).then(|| SavedTensorsHooks::push(Some(pack.clone())));
        let _save = frame::enter_save_body(pack);
        body(inputs)
    };
    let exit = snapshot_all(&state.state_hooks).map_err(|m| record.error(m))?;
    let output_context = output_hooks.as_ref().and_then(TensorHooks::capture);
    let parts = out.into_parts_inline();
    reject_grad_leaves(|| record.display(), &parts)?;
    let outputs = parts
        .iter()
        .map(|p| {
            let spec = match p {
                Some(t) => Some(OutputSpec {
                    meta: TensorMeta::of(t)?,
                    storage: WeakStorage::new(t),
                }),
                None => None,
            };
            Ok(Output {
                spec,
                slot: None,
                requested: false,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    {
        // Registered before the record has its outputs: only this thread
        // can ask for them before the forward returns.
        let mut persist = lock(&state.persist);
        for (i, (t, o)) in parts.iter().zip(&outputs).enumerate() {
            if let (Some(t), Some(spec)) = (t, &o.spec) {
                persist.register(&record, i, t, spec.meta.storage);
            }
        }
    }
    let eager: Vec<usize> = {
        let mut inner = lock(&record.inner);
        inner.exit_snapshots = exit;
        inner.output_context = output_context;
        inner.inputs.clear();
        // An output sharing storage with a kept save is resident anyway.
        let eager = outputs
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                let key = o.spec.as_ref().and_then(|s| s.meta.storage);
                key.is_some_and(|k| inner.identity_storages.contains(&k))
            })
            .map(|(i, _)| i)
            .collect();
        inner.outputs = outputs;
        eager
    };
    for i in eager {
        if let Some(t) = &parts[i] {
            record.persist(i, t, false)?;
        }
    }
    O::from_parts_inline(parts)
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
    restore_all(&state.state_hooks, &inner.exit_snapshots).map_err(|m| record.error(m))?;
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
                    recipe.name
                )));
            }
            let value = rebuild(base, &recipe.view).map_err(|m| record.error(m))?;
            inner.rebuilt[slot] = Some(value);
        }
    }
    let pop = graph_task_id().is_some() && !graph_task_keeps_graph();
    let mut served = Vec::with_capacity(inner.outputs.len());
    for (i, out) in inner.outputs.iter_mut().enumerate() {
        let Some(spec) = &out.spec else {
            served.push(None);
            continue;
        };
        let (spec, requires_grad) = (spec.meta.clone(), spec.meta.requires_grad);
        if state.strict && !out.requested {
            // Kept only because it is resident anyway: strict replay does
            // not serve it, so that a read nobody asked for fails here.
            served.push(Some((i, spec, requires_grad, None)));
            continue;
        }
        let slot = if pop {
            out.slot.take()
        } else {
            out.slot.as_ref().map(|s| match s {
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
                if requires_grad {
                    // The served identity is itself detached from `value`.
                    parts.push(Some(non_leaf(&value)?));
                    continue;
                }
                detached_alias(&value)?
            }
            Some(Slot::Packed { hooks, payload }) => hooks
                .unpack(&*payload)
                .map_err(|m| record.error(format!("unpacking output {i}: {m}")))?,
            Some(Slot::Failed(m)) => return Err(record.error(format!("unpacking output {i}: {m}"))),
            None => {
                let spec = PlaceholderSpec::from_meta(&spec).ok_or_else(|| {
                    record.error(format!(
                        "output {i} has an element type tch cannot name, so no placeholder \
                         can stand in for it"
                    ))
                })?;
                placeholder(
                    &spec,
                    &placeholder_message(&record, i, n_outputs, state.strict),
                )?
            }
        };
        parts.push(Some(if requires_grad {
            non_leaf(&value)?
        } else {
            value
        }));
    }
    O::from_parts(parts)
}

fn placeholder_message(record: &SaveRecord, slot: usize, n_outputs: usize, strict: bool) -> String {
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
         t;` in `remat!`), or pass it to a `recompute` region, which asks automatically.{strict}",
        region = record.display(),
        strict = if strict {
            " (Strict replay is on: outputs are served only when asked for, even those \
             autograd happens to keep.)"
        } else {
            ""
        }
    )
}

/// A region must return computed values, not fresh leaves requiring grad.
pub(crate) fn reject_grad_leaves(
    display: impl Fn() -> String,
    parts: &[Option<Tensor>],
) -> Result<()> {
    for (i, t) in parts.iter().enumerate() {
        if let Some(t) = t {
            if is_grad_leaf(t) {
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
