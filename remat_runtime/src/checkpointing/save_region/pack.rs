//! The pack hooks of a `Save` region's body: what each save becomes (rebuilt
//! from an input, packed by the user's hooks, or kept as a detached alias
//! with its version), and its unpack in backward.
//!
//! Invariant: a kept save is a detached alias, so the record never holds a
//! `grad_fn`; unpacking checks the version it had when packed.
//!
//! docs/semantics.md rules kept here: S1 (kept saves), S2 (the in-place
//! check), S3 (rebuilt inputs are neither kept nor offloaded), S6
//! (offloaded saves), S8 (which storages make an output resident anyway),
//! D2 (save names), T6 (the context of a save, captured where it is made),
//! O1-O3 (what an `Offload` region moves, and its in-place check).

use crate::bridge::{
    storage_data, tensor_version, HookPair, Payload, SaveSite, TensorMeta, WeakStorage,
};
use crate::checkpointing::frame;
use crate::checkpointing::save_region::offload::{OffloadStore, Offloaded};
use crate::checkpointing::save_region::record::{KeptRow, Layout, Recipe, SaveName, SaveRecord};
use crate::checkpointing::save_region::saved_input::classify;
use crate::checkpointing::tensor_hooks::{SavedTensorKind, TensorHooks};
use crate::hooks::save_names;
use std::any::Any;
use std::sync::Arc;
use tch::Tensor;

/// What a `Save` region's saves become.
enum BodySave {
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
    /// Copied to an `Offload` region's target.
    Offloaded {
        value: Offloaded,
        name: SaveName,
        region: Arc<SaveRecord>,
    },
    /// Kept as is (a detached alias), with the version it had.
    Kept {
        value: Tensor,
        version: u32,
        name: SaveName,
        region: Arc<SaveRecord>,
    },
}

/// Whether `payload` (packed by a `Save` body's pair) is a save rebuilt from
/// a recomputed input: its unpack needs the checkpoint's recomputation first.
// docs/semantics.md, rules C6 and S3: with no boundary node to start
// recomputation, the unpack of a rebuilt save starts it, as a holder's does.
pub(crate) fn is_rebuilt(payload: &(dyn Any + Send)) -> bool {
    matches!(
        payload.downcast_ref::<BodySave>(),
        Some(BodySave::Rebuilt { .. })
    )
}

/// A record packs its `Save` body's saves (instead of the checkpoint's
/// holders).
impl HookPair for SaveRecord {
    fn pack(&self, tensor: Tensor, site: SaveSite) -> Result<Payload, String> {
        // Packing happens while the body runs, when the region holds the
        // record: it is alive.
        let record = &self
            .me
            .upgrade()
            .ok_or("remat internal error: a Save region's record packed after it was freed")?;
        // One crossing for everything the checks below and a kept save's
        // report row read. A tensor whose metadata libtorch refuses to give
        // is no input's view, and only the user's hooks can pack it.
        let meta = TensorMeta::of(&tensor);
        let mut inner = record.inner();
        // docs/semantics.md, rule D2.
        // A name given to `save_for_backward`, or the next `saved.<i>`.
        let name = match save_names::next() {
            Some(given) => SaveName::Given(given),
            None => inner.next_unnamed(),
        };
        // docs/semantics.md, rule S3: decided first, so a rebuilt save never reaches
        // the user's hooks.
        let rebuilt = meta
            .as_ref()
            .ok()
            .filter(|_| record.rebuilds)
            .and_then(|m| classify(m, inner.inputs()));
        if let Some((input, view)) = rebuilt {
            let slot = inner.add_recipe(Recipe { input, view, name });
            return Ok(Box::new(BodySave::Rebuilt {
                record: record.clone(),
                slot,
            }));
        }
        drop(inner);
        // docs/semantics.md, rules S6, T3 and T6: offloaded with kind Backward, the
        // context captured now, inside the body.
        if let Some(hooks) = frame::user_hooks() {
            let context = hooks.capture();
            let payload = hooks.pack(tensor, SavedTensorKind::Backward, context, site.param)?;
            record.inner().note_offloaded();
            return Ok(Box::new(BodySave::User { hooks, payload }));
        }
        let meta = meta.map_err(|e| {
            record
                .error(format!("saved tensor `{name}` cannot be kept: {e}"))
                .to_string()
        })?;
        // docs/semantics.md, rules O1 and O2: an `Offload` region moves what
        // it keeps, parameters (and tensors without a storage) excepted.
        let movable = !site.param && meta.storage.is_some();
        match &record.offload {
            Some(store) if movable => moved(record, store, &tensor, &meta, name),
            _ => kept(record, tensor, site, &meta, name),
        }
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String> {
        match payload.downcast_ref::<BodySave>() {
            // docs/semantics.md, rules S3 and R5 (E17): filled when recomputation reached
            // the skipped region.
            Some(BodySave::Rebuilt { record, slot }) => {
                let inner = record.inner();
                inner.rebuilt(*slot).ok_or_else(|| {
                    record
                        .error(format!(
                            "its saved input `{}` was not rebuilt by a replay; forward and \
                             replay followed different code paths",
                            inner.recipes()[*slot].name
                        ))
                        .to_string()
                })
            }
            Some(BodySave::Kept {
                value,
                version,
                name,
                region,
            }) => {
                let now = tensor_version(value).map_err(|e| e.to_string())?;
                // docs/semantics.md, rule S2 (E11).
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
            Some(BodySave::User { hooks, payload }) => hooks.unpack(&**payload),
            // docs/semantics.md, rule O3 (E11).
            Some(BodySave::Offloaded {
                value,
                name,
                region,
            }) => value.restore().map_err(|m| {
                region
                    .error(format!("saved tensor `{name}` {m}"))
                    .to_string()
            }),
            None => Err("remat internal error: foreign payload in a Save region".into()),
        }
    }
}

/// A save an `Offload` region moves to its target (rules O1, O2).
fn moved(
    record: &Arc<SaveRecord>,
    store: &Arc<OffloadStore>,
    tensor: &Tensor,
    meta: &TensorMeta,
    name: SaveName,
) -> Result<Payload, String> {
    let value = store.offload(tensor, &name.to_string()).map_err(|m| {
        record
            .error(format!("offloading `{name}`: {m}"))
            .to_string()
    })?;
    if let Some(key) = meta.storage {
        // docs/semantics.md, rules S8 and O4: an output on this storage
        // shares the copy.
        record.inner().note_kept_storage(key);
    }
    Ok(Box::new(BodySave::Offloaded {
        value,
        name,
        region: record.clone(),
    }))
}

/// A save kept as is, a detached alias with its version (rules S1, S2),
/// and its report row.
fn kept(
    record: &Arc<SaveRecord>,
    tensor: Tensor,
    site: SaveSite,
    meta: &TensorMeta,
    name: SaveName,
) -> Result<Payload, String> {
    let mut inner = record.inner();
    if let Some(key) = meta.storage {
        if !site.param {
            // docs/semantics.md, rule S8 (parameters excepted).
            inner.note_kept_storage(key);
        }
    }
    if let Some(storage) = WeakStorage::new(&tensor) {
        let kind = tensor.kind();
        inner.add_kept(KeptRow {
            name: name.clone(),
            storage,
            nbytes: meta.storage_nbytes,
            layout: Layout::from_meta(meta, kind),
            kind,
            param: site.param,
            address: storage_data(&tensor),
        });
    }
    // docs/semantics.md, rules S1 and S2: kept with the version it has now
    // (an inference tensor has none: its error is libtorch's own).
    let version = match meta.version {
        Some(v) => v,
        None => tensor_version(&tensor).map_err(|e| e.to_string())?,
    };
    Ok(Box::new(BodySave::Kept {
        value: tensor,
        version,
        name,
        region: record.clone(),
    }))
}
