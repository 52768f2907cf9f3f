//! A `Save` region on the forward: its body runs once with its saves kept
//! (through the record's pack hooks), its outputs are registered in the
//! output index, and those resident anyway are kept at once.
//!
//! Invariant: the body runs with its `SaveRecord` as its frame's save pack,
//! so the checkpoint's forward hook hands every save of the body to it and
//! nothing the body saves becomes a holder.
//!
//! docs/semantics.md rules kept here: S1 (the body's saves are kept), S3-S5
//! (what the inputs allow to rebuild), S7 (the output index), S8 (outputs
//! resident anyway), S9 (the exit snapshot), S10 (output metadata), R6 (no
//! fresh leaves), T4 and K7 (the pair and context for kept outputs).

use crate::bridge::{is_grad_leaf, HookPair, TensorMeta, WeakStorage};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::frame;
use crate::checkpointing::save_region::keep::Source;
use crate::checkpointing::save_region::offload::OffloadStore;
use crate::checkpointing::save_region::record::{Exit, Output, OutputSpec, SaveRecord};
use crate::checkpointing::save_region::saved_input::InputInfo;
use crate::checkpointing::saved_tensors::SavedTensorsHooks;
use crate::checkpointing::tensor_hooks::TensorHooks;
use crate::error::{Error, Result};
use crate::hooks::state_hooks::snapshot_all;
use crate::io::{RegionInput, RegionOutput};
use crate::sync::lock;
use std::borrow::Cow;
use std::panic::Location;
use std::sync::Arc;
use tch::{Device, Tensor};

/// Runs a `Save` region on the forward.
pub(crate) fn forward<I: RegionInput, O: RegionOutput>(
    state: &Arc<CheckpointState>,
    name: Cow<'static, str>,
    location: &'static Location<'static>,
    offload: Option<Device>,
    inputs: I,
    body: impl FnOnce(I) -> O,
) -> Result<O> {
    // docs/semantics.md, rule T4: kept outputs use the pair in effect at entry.
    let output_hooks = frame::user_hooks();
    let record = SaveRecord::new(
        state.settings().name.clone(),
        name.clone(),
        location,
        offload.map(OffloadStore::new),
        !state.settings().backward_inside,
        input_infos(state, &inputs),
        output_hooks.clone(),
    );
    state.records().add(name, record.clone());
    // docs/semantics.md, rule R11: what recomputation serves is found
    // through the path's list of regions.
    lock(state.path()).save_region(&record);
    let out = {
        let pack: Arc<dyn HookPair> = record.clone();
        // Usually the checkpoint's hook is on top and hands the body's saves
        // to `pack`; under hooks pushed inside the checkpoint (a tracker, a
        // disabled level), `pack` goes on top natively, shadowing them.
        let _hooks =
            // docs/semantics.md, rule S1: also under hooks pushed inside the checkpoint.
            (!frame::own_hook_on_top()).then(|| SavedTensorsHooks::push(Some(pack.clone())));
        let _save = frame::enter_save_body(pack);
        body(inputs)
    };
    let exit = exit(state, &record, output_hooks.as_ref())?;
    let parts = crate::parts::into_parts(out);
    // docs/semantics.md, rule R6.
    reject_grad_leaves(|| record.display(), &parts)?;
    let outputs = outputs(&parts)?;
    register(state, &record, &parts, &outputs);
    let (eager, rebuilds) = end_body(&record, exit, outputs, parts.layout().to_vec());
    if rebuilds {
        // docs/semantics.md, rule C17: a replay must reach this region
        // before it may stop.
        state.holders().add_rebuilding_region();
    }
    for i in eager {
        if let Some(t) = &parts[i] {
            record.keep(i, Source::Output(t.shallow_clone()), false)?;
        }
    }
    crate::parts::from_parts(parts)
}

/// Registers the outputs in the output index (rule S7), before the record
/// has them: only this thread can ask for them before the forward returns.
fn register(
    state: &CheckpointState,
    record: &Arc<SaveRecord>,
    parts: &[Option<Tensor>],
    outputs: &[Output],
) {
    let mut index = lock(state.output_index());
    for (i, (t, o)) in parts.iter().zip(outputs).enumerate() {
        if let (Some(t), Some(spec)) = (t, o.spec()) {
            index.register(record, i, t, spec.meta.storage);
        }
    }
}

/// Hands the record what the body's end left; returns the outputs that are
/// resident anyway, to keep at once (rule S8), and whether the region has
/// saves to rebuild on replay (S3).
fn end_body(
    record: &SaveRecord,
    exit: Exit,
    outputs: Vec<Output>,
    layout: Vec<usize>,
) -> (Vec<usize>, bool) {
    let mut inner = record.inner();
    // docs/semantics.md, rule S8: kept at once, but not as asked for (P5).
    // An output sharing storage with a kept save is resident anyway; rule
    // O4: for an `Offload` region, one on a moved storage shares the copy.
    let eager = (0..outputs.len())
        .filter(|&i| {
            let key = outputs[i].spec().and_then(|s| s.meta.storage);
            key.is_some_and(|k| inner.on_kept_storage(k))
        })
        .collect();
    inner.end_body(exit, outputs, layout);
    (eager, !inner.recipes().is_empty())
}

/// docs/semantics.md, rules S3 and S5: what each tensor input was at entry,
/// and whether it is (a view of) a Save output, which is never rebuilt from.
fn input_infos<I: RegionInput>(state: &CheckpointState, inputs: &I) -> Vec<InputInfo> {
    let index = lock(state.output_index());
    // Visited in place: no handle is cloned per input.
    let (mut infos, mut at) = (Vec::new(), 0);
    inputs.visit(&mut |t| {
        if let Some(info) = InputInfo::new(at, t, |key| index.contains_key(key)) {
            infos.push(info);
        }
        at += 1;
    });
    infos
}

/// What the region's exit leaves for a replay that skips it.
fn exit(
    state: &CheckpointState,
    record: &SaveRecord,
    output_hooks: Option<&TensorHooks>,
) -> Result<Exit> {
    // docs/semantics.md, rules S9 and H2: the exit snapshot.
    let snapshots = snapshot_all(&state.settings().state_hooks).map_err(|m| record.error(m))?;
    // docs/semantics.md, rule C14: the generators, where the body (or the
    // code since the last snapshot) drew.
    let generators = state
        .random()
        .at_save_exit()
        .map_err(|e| record.error(format!("cannot read the random generators: {e}")))?;
    Ok(Exit {
        snapshots,
        generators,
        // docs/semantics.md, rules K7 and T6: a kept output's context is
        // captured here, at the region's exit, even if a consumer asks later.
        output_context: output_hooks.and_then(TensorHooks::capture),
    })
}

/// docs/semantics.md, rule S10: what a placeholder is made from.
fn outputs(parts: &[Option<Tensor>]) -> Result<Vec<Output>> {
    // Sized up front: collecting through `Result` starts a `Vec` of these
    // (a few hundred bytes each) at four, a request above glibc's small
    // bins that consolidates its fast bins, the largest single cost of a
    // region on the forward (docs/performance.md, section 3).
    let mut outputs = Vec::with_capacity(parts.len());
    for p in parts {
        let spec = match p {
            Some(t) => Some(OutputSpec {
                meta: TensorMeta::of(t)?,
                storage: WeakStorage::new(t),
            }),
            None => None,
        };
        outputs.push(Output::new(spec));
    }
    Ok(outputs)
}

/// A region must return computed values, not fresh leaves requiring grad.
// docs/semantics.md, rule R6 (E5), for both policies.
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
