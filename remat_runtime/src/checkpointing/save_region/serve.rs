//! A `Save` region reached on recomputation: its body is skipped; state
//! hooks go back to its exit snapshot, the saved inputs it chose not to keep
//! are rebuilt, and each output is served (if a consumer asked for it) or
//! stands in as a placeholder.
//!
//! Invariant: the body never runs here; a served value is released once
//! served unless the backward retains the graph.
//!
//! docs/semantics.md rules kept here: P1 (the order: exit snapshot, rebuilt
//! saves, outputs), P2 (serving), P3 (release), P4 (placeholders), P5
//! (strict recomputation), P6 (rebuilding fails loudly), R5 (a region the
//! forward did not record), H3 (a skipped region's exit snapshot), C17 (a
//! replay may stop once the region's saves are rebuilt).

use crate::bridge::{
    detached_alias, graph_task_id, graph_task_keeps_graph, is_placeholder, placeholder,
    served_value, storage_key, tensor_version, PlaceholderSpec, TensorMeta, WeakStorage,
};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::early_stop;
use crate::checkpointing::save_region::record::{Exit, RecordInner, SaveRecord, Slot};
use crate::checkpointing::save_region::saved_input::rebuild;
use crate::error::{Error, Result};
use crate::hooks::state_hooks::restore_all;
use crate::io::{input_tensors, RegionInput, RegionOutput};
use crate::sync::lock;
use std::sync::Arc;
use tch::Tensor;

/// A `Save` region reached on replay: its body is skipped.
pub(crate) fn serve<I: RegionInput, O: RegionOutput>(
    state: &Arc<CheckpointState>,
    name: &str,
    inputs: I,
) -> Result<O> {
    // docs/semantics.md, rule R5 (E6).
    let record = state
        .records()
        .reached(name, || state.region_display(name))?;
    // docs/semantics.md, rule C17: in a recomputation that stopped, the
    // region does nothing and its outputs are placeholders.
    if state.holders().stopped() {
        return dry_outputs(state, &record);
    }
    let checking = lock(state.path()).checking();
    let mut inner = record.inner();
    // docs/semantics.md, rules P1 and H3: first the region's exit snapshot.
    restore_exit(state, &record, inner.exit())?;
    // docs/semantics.md, rules P1 and S3: then the saves it did not keep, rebuilt
    // from the recomputed inputs; P6 (E14-E16) when that cannot be done.
    if !inner.recipes().is_empty() {
        rebuild_saves(&record, &mut inner, &input_tensors(&inputs))?;
        // docs/semantics.md, rule C17: this region's rebuilt saves may be the
        // last thing backward needs; then the replay ends here.
        if state.holders().region_rebuilt() {
            drop(inner);
            state.stop_recomputation(false);
            return dry_outputs(state, &record);
        }
    }
    // docs/semantics.md, rule P3: released when served, unless the graph is
    // retained (or outside any backward).
    let pop = graph_task_id().is_some() && !graph_task_keeps_graph();
    let strict = state.settings().strict;
    let taken: Vec<Option<Taken>> = inner
        .outputs_mut()
        .iter_mut()
        .map(|out| {
            let spec = out.spec()?.meta.clone();
            // docs/semantics.md, rule P5: kept only because it is resident
            // anyway, strict recomputation does not serve it, so that a read
            // nobody asked for fails here.
            let slot = if strict && !out.asked() {
                None
            } else {
                out.for_serving(pop)
            };
            Some(Taken { spec, slot })
        })
        .collect();
    // docs/semantics.md, rule R7: the output's shape, `Vec` lengths
    // included, as on the forward.
    let layout = inner.layout().to_vec();
    drop(inner);
    let n_outputs = taken.len();
    let mut parts = Vec::with_capacity(n_outputs);
    for (i, taken) in taken.into_iter().enumerate() {
        parts.push(match taken {
            Some(taken) => Some(served(&record, i, n_outputs, strict, taken)?),
            None => None,
        });
    }
    // docs/semantics.md, rule R11: what recomputation asks for from here
    // on is found by the served values' storages.
    if checking {
        note_served(state, &record, &parts);
    }
    O::from_parts(parts, &layout)
}

/// The region's outputs in a recomputation that stopped: placeholders that
/// say so, on which the tail's ops run dry (rule C17).
fn dry_outputs<O: RegionOutput>(state: &CheckpointState, record: &SaveRecord) -> Result<O> {
    let inner = record.inner();
    let message = early_stop::read_message(state.display_name());
    let mut parts = Vec::with_capacity(inner.outputs().len());
    for (i, out) in inner.outputs().iter().enumerate() {
        parts.push(match out.spec() {
            Some(spec) => Some(placeholder_for(record, i, &spec.meta, &message)?),
            None => None,
        });
    }
    let layout = inner.layout().to_vec();
    drop(inner);
    O::from_parts(parts, &layout)
}

/// An output as the record had it when a replay reached its region.
struct Taken {
    spec: TensorMeta,
    /// What was kept (or a copy of its handle), `None` when nothing was.
    slot: Option<Slot>,
}

/// The exit state the skipped body left: the state hooks' snapshot, and
/// the generators where it (or the code before it) drew (rules H3, C14).
fn restore_exit(state: &CheckpointState, record: &SaveRecord, exit: &Exit) -> Result<()> {
    restore_all(&state.settings().state_hooks, &exit.snapshots).map_err(|m| record.error(m))?;
    if let Some(generators) = &exit.generators {
        generators
            .restore()
            .map_err(|e| record.error(format!("cannot restore the random generators: {e}")))?;
    }
    Ok(())
}

/// Rebuilds the saves the region did not keep from the recomputed inputs
/// (rules S3, P6).
fn rebuild_saves(record: &SaveRecord, inner: &mut RecordInner, replayed: &[Tensor]) -> Result<()> {
    for slot in 0..inner.recipes().len() {
        let recipe = &inner.recipes()[slot];
        let base = replayed.get(recipe.input).ok_or_else(|| {
            record.error(
                "replay passed it fewer tensor inputs than the forward did; forward and \
                 replay followed different code paths",
            )
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
        inner.set_rebuilt(slot, value);
    }
    Ok(())
}

/// What replay serves for output `i`: the kept value (checked, rule P2),
/// brought back (O1, O3), or a placeholder (P4).
fn served(
    record: &SaveRecord,
    i: usize,
    n_outputs: usize,
    strict: bool,
    Taken { spec, slot }: Taken,
) -> Result<Tensor> {
    let requires_grad = spec.requires_grad;
    let value = match slot {
        Some(Slot::Resident { value, version }) => {
            let now = tensor_version(&value)?;
            // docs/semantics.md, rule P2 (E12).
            if now != version {
                return Err(modified_in_place(record, i));
            }
            if requires_grad {
                // docs/semantics.md, rule P2: the forward's `requires_grad`, as a non-leaf.
                // The served identity is itself detached from `value`.
                return served_value(&value);
            }
            detached_alias(&value)?
        }
        Some(Slot::Stored { value, version }) => {
            // docs/semantics.md, rule P2 (E12).
            if value.version() != version {
                return Err(modified_in_place(record, i));
            }
            // A fresh tensor over the kept storage, with the output's layout.
            value.tensor(&spec)?
        }
        // docs/semantics.md, rules O1 and O3 (E12): back from the target.
        Some(Slot::Offloaded(o)) => o
            .restore()
            .map_err(|m| record.error(format!("output {i} {m}")))?,
        Some(Slot::Packed { hooks, payload }) => hooks
            .unpack(&*payload)
            .map_err(|m| record.error(format!("unpacking output {i}: {m}")))?,
        Some(Slot::Failed(m)) => return Err(record.error(format!("unpacking output {i}: {m}"))),
        None => {
            // docs/semantics.md, rule P4 (E13): nobody asked, so a placeholder.
            let message = placeholder_message(record, i, n_outputs, strict);
            placeholder_for(record, i, &spec, &message)?
        }
    };
    if requires_grad {
        served_value(&value)
    } else {
        Ok(value)
    }
}

/// E12: output `i` changed after it was kept.
fn modified_in_place(record: &SaveRecord, i: usize) -> Error {
    record.error(format!(
        "output {i} was modified in place after it was kept for replay; clone it before \
         modifying it"
    ))
}

/// A placeholder of output `i`'s metadata saying `message` (rule P4; E28
/// when tch cannot name its element type).
fn placeholder_for(
    record: &SaveRecord,
    i: usize,
    meta: &TensorMeta,
    message: &str,
) -> Result<Tensor> {
    let spec = PlaceholderSpec::from_meta(meta).ok_or_else(|| {
        record.error(format!(
            "output {i} has an element type tch cannot name, so no placeholder can stand \
             in for it"
        ))
    })?;
    placeholder(&spec, message)
}

/// Pins what was served and notes it on the path, so that asks from here
/// on find it by storage (rule R11).
fn note_served(state: &CheckpointState, record: &Arc<SaveRecord>, parts: &[Option<Tensor>]) {
    let mut path = lock(state.path());
    let mut inner = record.inner();
    for (slot, (out, part)) in inner.outputs_mut().iter_mut().zip(parts).enumerate() {
        let pinned = part.as_ref().and_then(WeakStorage::new);
        if let (Some(t), Some(_)) = (part, &pinned) {
            if let Some(key) = storage_key(t) {
                path.served(record, slot, key);
            }
        }
        out.note_served(pinned);
    }
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
         replays read this one's data without asking. Fix: mark it with `remat::needs(..)` \
         right before the bare code that reads it (`needs t;` in `remat!`; \
         `recompute_needs_tensor(&t)` with the untyped `Region::call`), or pass it to a \
         `recompute` region, which asks automatically.{strict}",
        region = record.display(),
        strict = if strict {
            " (Strict replay is on: outputs are served only when asked for, even those \
             autograd happens to keep.)"
        } else {
            ""
        }
    )
}
