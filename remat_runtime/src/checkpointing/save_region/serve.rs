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
    served_value, storage_key, tensor_version, PlaceholderSpec, WeakStorage,
};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::early_stop::stop_now;
use crate::checkpointing::save_region::record::{SaveRecord, Slot};
use crate::checkpointing::save_region::saved_input::rebuild;
use crate::error::{Error, Result};
use crate::hooks::state_hooks::restore_all;
use crate::io::{input_tensors, RegionInput, RegionOutput};
use crate::sync::lock;
use std::sync::Arc;

/// A `Save` region reached on replay: its body is skipped.
pub(crate) fn serve<I: RegionInput, O: RegionOutput>(
    state: &Arc<CheckpointState>,
    name: &str,
    inputs: I,
) -> Result<O> {
    // docs/semantics.md, rule R5 (E6).
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
    let checking = lock(&state.path).checking();
    let mut inner = lock(&record.inner);
    // docs/semantics.md, rules P1 and H3: first the region's exit snapshot.
    restore_all(&state.state_hooks, &inner.exit_snapshots).map_err(|m| record.error(m))?;
    // docs/semantics.md, rule C14: the generators as the skipped body left
    // them, where it (or the code before it) drew.
    if let Some(generators) = &inner.exit_generators {
        generators
            .restore()
            .map_err(|e| record.error(format!("cannot restore the random generators: {e}")))?;
    }
    // docs/semantics.md, rules P1 and S3: then the saves it did not keep, rebuilt
    // from the recomputed inputs; P6 (E14-E16) when that cannot be done.
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
        // docs/semantics.md, rule C17: this region's rebuilt saves may be the
        // last thing backward needs; then the replay ends here.
        let done = {
            let mut checkpoint = lock(&state.inner);
            checkpoint.stop.note_rebuilt();
            let done = checkpoint.stop.done(checkpoint.replay_count);
            checkpoint.stop.stopped |= done;
            done
        };
        if done {
            drop(inner);
            stop_now();
        }
    }
    // docs/semantics.md, rule P3: released when served, unless the graph is
    // retained (or outside any backward).
    let pop = graph_task_id().is_some() && !graph_task_keeps_graph();
    let mut served = Vec::with_capacity(inner.outputs.len());
    for (i, out) in inner.outputs.iter_mut().enumerate() {
        let Some(spec) = &out.spec else {
            served.push(None);
            continue;
        };
        let (spec, requires_grad) = (spec.meta.clone(), spec.meta.requires_grad);
        // docs/semantics.md, rule P5.
        if state.strict && !out.requested {
            // Kept only because it is resident anyway: strict recomputation does
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
                Slot::Offloaded(o) => Slot::Offloaded(o.clone()),
                Slot::Failed(m) => Slot::Failed(m.clone()),
            })
        };
        served.push(Some((i, spec, requires_grad, slot)));
    }
    let n_outputs = inner.outputs.len();
    // docs/semantics.md, rule R7: the output's shape, `Vec` lengths
    // included, as on the forward.
    let layout = inner.layout.clone();
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
                // docs/semantics.md, rule P2 (E12).
                if now != version {
                    return Err(record.error(format!(
                        "output {i} was modified in place after it was kept for replay; \
                         clone it before modifying it"
                    )));
                }
                if requires_grad {
                    // docs/semantics.md, rule P2: the forward's `requires_grad`, as a non-leaf.
                    // The served identity is itself detached from `value`.
                    parts.push(Some(served_value(&value)?));
                    continue;
                }
                detached_alias(&value)?
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
                // docs/semantics.md, rule P4 (E13, E28): nobody asked, so a placeholder.
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
            served_value(&value)?
        } else {
            value
        }));
    }
    // docs/semantics.md, rule R11: what recomputation asks for from here
    // on is found by the served values' storages.
    if checking {
        let mut path = lock(&state.path);
        let mut inner = lock(&record.inner);
        for (slot, (out, part)) in inner.outputs.iter_mut().zip(&parts).enumerate() {
            out.served = part.as_ref().and_then(WeakStorage::new);
            if let (Some(t), Some(_)) = (part, &out.served) {
                if let Some(key) = storage_key(t) {
                    path.served(&record, slot, key);
                }
            }
        }
    }
    O::from_parts(parts, &layout)
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
