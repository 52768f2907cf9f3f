//! What the forward of one `Save` region records for its replay and its
//! reports: how each of its saves is kept (as is, rebuilt from an input, or
//! packed by the user's hooks), its outputs' metadata, and the outputs kept
//! for replay.
//!
//! Invariant: `outputs[i].slot` is `None` until a consumer asks for output `i`
//! (or it is resident anyway); once filled it is only emptied by serving it
//! on replay. Kept values are detached aliases: a record never holds a
//! `grad_fn`, so it cannot keep its graph alive.

use crate::bridge::{
    Dims, GeneratorsSnapshot, KeptStorage, Payload, StorageKey, TensorMeta, WeakStorage,
};
use crate::checkpointing::save_region::offload::{OffloadStore, Offloaded};
use crate::checkpointing::save_region::saved_input::{InputInfo, ViewSpec};
use crate::checkpointing::tensor_hooks::TensorHooks;
use crate::error::Error;
use crate::hooks::state_hooks::Snapshots;
use crate::sync::lock;
use std::any::Any;
use std::borrow::Cow;
use std::collections::HashSet;
use std::panic::Location;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tch::{Kind, Tensor};

/// What the forward of one `Save` region recorded.
///
/// ```text
/// inputs  -> which saves are inputs (rebuilt on replay instead of kept)
/// kept    -> saves kept as is, for reports
/// outputs -> each output's metadata, and its value once a consumer asks
/// ```
pub(crate) struct SaveRecord {
    /// The record itself, weakly: its saves' payloads hold it strongly, and
    /// the record is its body's save pack (no second allocation for one).
    pub me: Weak<SaveRecord>,
    /// The checkpoint's name and the region's: messages and reports show
    /// `checkpoint::region`, formatted only when they need it.
    pub checkpoint: Option<Arc<str>>,
    /// Borrowed when the region's name is a literal: no allocation per call.
    pub name: Cow<'static, str>,
    /// Where the region was called (the default annotation of reports).
    pub location: &'static Location<'static>,
    /// An `Offload` region's copies (docs/semantics.md, rule O1).
    pub offload: Option<Arc<OffloadStore>>,
    /// Saves of the region's inputs may be rebuilt on replay (S3); not in a
    /// checkpoint whose closure computes gradients itself (C16), which reads
    /// them before any replay.
    pub rebuilds: bool,
    inner: Mutex<RecordInner>,
}

/// A save kept as is, for reports.
pub(crate) struct KeptRow {
    /// The name given to `save_for_backward`, or `saved.<i>`.
    pub name: SaveName,
    pub storage: WeakStorage,
    pub nbytes: i64,
    pub layout: Layout,
    pub kind: Kind,
    /// A parameter (or a view of one): not activation memory.
    pub param: bool,
    /// Where its storage's data is (to find its allocation).
    pub address: usize,
}

/// Where a tensor sits in its storage: what tells aliases (same layout)
/// from views of another shape, and how much of the storage it covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Inline for the common shapes: a kept save allocates none.
    pub dims: Dims,
    pub offset: i64,
    pub element_size: i64,
}

impl Layout {
    pub(crate) fn of(t: &Tensor) -> Layout {
        Layout {
            dims: Dims::Heap {
                sizes: t.size(),
                strides: t.stride(),
            },
            offset: crate::bridge::storage_offset(t),
            element_size: t.kind().elt_size_in_bytes() as i64,
        }
    }

    /// The layout `meta` describes, for elements of `kind`: no crossing.
    pub(crate) fn from_meta(meta: &TensorMeta, kind: Kind) -> Layout {
        Layout {
            dims: meta.dims.clone(),
            offset: meta.storage_offset,
            element_size: kind.elt_size_in_bytes() as i64,
        }
    }

    pub(crate) fn sizes(&self) -> &[i64] {
        self.dims.sizes()
    }

    /// The bytes `[start, end)` its elements span (from its first to its
    /// last addressed element; exact for contiguous tensors).
    pub(crate) fn span(&self) -> (i64, i64) {
        if self.sizes().contains(&0) {
            return (0, 0);
        }
        let (mut low, mut high) = (self.offset, self.offset);
        for (size, stride) in self.sizes().iter().zip(self.dims.strides()) {
            let reach = (size - 1) * stride;
            if reach < 0 {
                low += reach;
            } else {
                high += reach;
            }
        }
        (low * self.element_size, (high + 1) * self.element_size)
    }
}

/// One output of the region: one allocation per record holds them all.
pub(crate) struct Output {
    /// `None` for an absent output.
    spec: Option<OutputSpec>,
    /// The value kept for replay: `None` until a consumer asks (or it is
    /// resident anyway); emptied only by serving it on replay.
    slot: Option<Slot>,
    /// A consumer asked for it (a `Recompute` region or
    /// `recompute_needs_tensor`), as opposed to kept because it is resident
    /// anyway. Strict recomputation serves only these.
    asked: bool,
    /// The storage of what the latest recomputation served for it, pinned
    /// so that its address names no other storage while the path check
    /// looks values up by it (docs/semantics.md, rule R11).
    served: Option<WeakStorage>,
}

impl Output {
    /// An output with metadata `spec` (`None`: absent), not kept yet.
    pub(crate) fn new(spec: Option<OutputSpec>) -> Output {
        Output {
            spec,
            slot: None,
            asked: false,
            served: None,
        }
    }

    pub(crate) fn spec(&self) -> Option<&OutputSpec> {
        self.spec.as_ref()
    }

    /// What is kept for replay, if anything.
    pub(crate) fn slot(&self) -> Option<&Slot> {
        self.slot.as_ref()
    }

    /// Whether a consumer asked for it (rule P5).
    pub(crate) fn asked(&self) -> bool {
        self.asked
    }

    /// Notes an ask (`asked`) or a keep because it is resident anyway;
    /// whether a value is still to be kept (rule K6: asking twice keeps once).
    pub(crate) fn ask(&mut self, asked: bool) -> bool {
        self.asked |= asked;
        self.slot.is_none()
    }

    /// Keeps `slot` for replay.
    pub(crate) fn keep(&mut self, slot: Slot) {
        self.slot = Some(slot);
    }

    /// What a replay serves: the kept value itself when it is released once
    /// served (`pop`, rule P3), else a copy of the handle (a packed one
    /// unpacked now, since unpacking does not consume the payload).
    pub(crate) fn for_serving(&mut self, pop: bool) -> Option<Slot> {
        if pop {
            return self.slot.take();
        }
        self.slot.as_ref().map(|s| match s {
            Slot::Resident { value, version } => Slot::Resident {
                value: value.shallow_clone(),
                version: *version,
            },
            Slot::Stored { value, version } => match value.try_clone() {
                Ok(value) => Slot::Stored {
                    value,
                    version: *version,
                },
                Err(e) => Slot::Failed(e.to_string()),
            },
            Slot::Packed { hooks, payload } => match hooks.unpack(&**payload) {
                Ok(value) => Slot::Resident {
                    version: crate::bridge::tensor_version(&value).unwrap_or(0),
                    value,
                },
                Err(m) => Slot::Failed(m),
            },
            Slot::Offloaded(o) => Slot::Offloaded(o.clone()),
            Slot::Failed(m) => Slot::Failed(m.clone()),
        })
    }

    /// Pins the storage of what the latest recomputation served (R11).
    pub(crate) fn note_served(&mut self, storage: Option<WeakStorage>) {
        self.served = storage;
    }
}

pub(crate) struct OutputSpec {
    /// Taken in one crossing; a placeholder's spec is built from it only
    /// when replay serves one.
    pub meta: TensorMeta,
    /// Its storage, weakly: reports say when the output is gone.
    pub storage: Option<WeakStorage>,
}

/// A kept output.
pub(crate) enum Slot {
    /// A detached alias and its version when kept.
    Resident { value: Tensor, version: u32 },
    /// The storage and version counter of an output that is rebuilt from
    /// them and its recorded layout when served (what most outputs are
    /// kept as: no tensor of its own until then), and its version when kept.
    Stored { value: KeptStorage, version: u32 },
    /// Packed by the user's saved-tensor hooks (offloaded).
    Packed {
        hooks: TensorHooks,
        payload: Payload,
    },
    /// Copied to an `Offload` region's target.
    Offloaded(Offloaded),
    /// An unpack that failed while serving under `retain_graph`.
    Failed(String),
}

pub(crate) struct Recipe {
    pub input: usize,
    pub view: Option<ViewSpec>,
    /// The save's name (given, or `saved.<i>`).
    pub name: SaveName,
}

/// What a region's exit left for a replay that skips it (rules S9, C14).
#[derive(Default)]
pub(crate) struct Exit {
    pub snapshots: Snapshots,
    /// The default generators at the region's exit, when something drew
    /// since the checkpoint's last snapshot of them (rule C14).
    pub generators: Option<Arc<GeneratorsSnapshot>>,
    /// The context the user's hooks captured at the exit, for outputs
    /// kept later (rules K7, T6).
    pub output_context: Option<Arc<dyn Any + Send + Sync>>,
}

/// The mutable part of a [`SaveRecord`]: written by the body's pack hooks
/// (`pack`), the region's exit (`forward`), the asks (`keep`) and the
/// replay that skips it (`serve`), each through a method here.
#[derive(Default)]
pub(crate) struct RecordInner {
    /// The region's tensor inputs at entry, until its body returns (S3).
    inputs: Vec<InputInfo>,
    exit: Exit,
    outputs: Vec<Output>,
    /// The lengths of the output's `Vec`s (`RegionOutput::into_parts`).
    layout: Vec<usize>,
    recipes: Vec<Recipe>,
    rebuilt: Vec<Option<Tensor>>,
    /// Storages of kept saves: an output on one is resident anyway (S8).
    identity_storages: HashSet<StorageKey>,
    kept: Vec<KeptRow>,
    offloaded: usize,
    /// How many unnamed saves so far (the next is `saved.<unnamed>`).
    unnamed: usize,
    /// The user's hooks at region entry, for kept outputs (T4).
    output_hooks: Option<TensorHooks>,
}

impl RecordInner {
    /// The region's tensor inputs, while its body runs (S3).
    pub(crate) fn inputs(&self) -> &[InputInfo] {
        &self.inputs
    }

    /// The name of the next save not named through `save_for_backward` (D2).
    pub(crate) fn next_unnamed(&mut self) -> SaveName {
        self.unnamed += 1;
        SaveName::Unnamed(self.unnamed - 1)
    }

    /// A save rebuilt from an input on replay (S3); returns its slot.
    pub(crate) fn add_recipe(&mut self, recipe: Recipe) -> usize {
        self.recipes.push(recipe);
        self.rebuilt.push(None);
        self.recipes.len() - 1
    }

    /// A save packed by the user's hooks (S6).
    pub(crate) fn note_offloaded(&mut self) {
        self.offloaded += 1;
    }

    /// A kept (or moved) save's storage: an output on it is resident
    /// anyway (S8, O4).
    pub(crate) fn note_kept_storage(&mut self, key: StorageKey) {
        self.identity_storages.insert(key);
    }

    /// A save kept as is, for reports.
    pub(crate) fn add_kept(&mut self, row: KeptRow) {
        self.kept.push(row);
    }

    /// The region's body returned: what its exit left and its outputs. The
    /// inputs are no longer needed (S3 decided what to rebuild).
    pub(crate) fn end_body(&mut self, exit: Exit, outputs: Vec<Output>, layout: Vec<usize>) {
        self.exit = exit;
        self.outputs = outputs;
        self.layout = layout;
        self.inputs.clear();
    }

    /// Whether an output on `key` is resident anyway (S8, O4).
    pub(crate) fn on_kept_storage(&self, key: StorageKey) -> bool {
        self.identity_storages.contains(&key)
    }

    pub(crate) fn exit(&self) -> &Exit {
        &self.exit
    }

    pub(crate) fn outputs(&self) -> &[Output] {
        &self.outputs
    }

    /// The outputs, to ask for, keep or serve (each through `Output`'s
    /// methods).
    pub(crate) fn outputs_mut(&mut self) -> &mut [Output] {
        &mut self.outputs
    }

    /// The user's pair at region entry and the context it captured at the
    /// exit, for outputs kept when asked (K7).
    pub(crate) fn output_pair(&self) -> (Option<TensorHooks>, Option<Arc<dyn Any + Send + Sync>>) {
        (self.output_hooks.clone(), self.exit.output_context.clone())
    }

    pub(crate) fn layout(&self) -> &[usize] {
        &self.layout
    }

    pub(crate) fn recipes(&self) -> &[Recipe] {
        &self.recipes
    }

    /// Puts the value a replay rebuilt for recipe `slot` (S3).
    pub(crate) fn set_rebuilt(&mut self, slot: usize, value: Tensor) {
        self.rebuilt[slot] = Some(value);
    }

    /// The value a replay rebuilt for recipe `slot`, if it did.
    pub(crate) fn rebuilt(&self, slot: usize) -> Option<Tensor> {
        self.rebuilt
            .get(slot)
            .and_then(Option::as_ref)
            .map(Tensor::shallow_clone)
    }

    pub(crate) fn kept(&self) -> &[KeptRow] {
        &self.kept
    }

    /// How many saves the user's hooks packed.
    pub(crate) fn offloaded(&self) -> usize {
        self.offloaded
    }
}

/// How reports and messages call a save of a region: the name given to
/// `save_for_backward`, or `saved.<i>` for the `i`-th unnamed one, formatted
/// only when shown (a save makes no string of its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SaveName {
    Given(String),
    Unnamed(usize),
}

impl std::fmt::Display for SaveName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SaveName::Given(name) => f.write_str(name),
            // docs/semantics.md, rule D2: the one place unnamed saves get
            // their name.
            SaveName::Unnamed(i) => write!(f, "saved.{i}"),
        }
    }
}

/// How reports and messages call a region: `checkpoint::region`, or the
/// region alone in an unnamed checkpoint.
pub(crate) fn region_path(checkpoint: Option<&str>, region: &str) -> String {
    match checkpoint {
        Some(c) => format!("{c}::{region}"),
        None => region.to_string(),
    }
}

impl SaveRecord {
    /// The record of a `Save` region entering its body with tensor inputs
    /// `inputs` and the user's pair `output_hooks` (T4).
    pub(crate) fn new(
        checkpoint: Option<Arc<str>>,
        name: Cow<'static, str>,
        location: &'static Location<'static>,
        offload: Option<Arc<OffloadStore>>,
        rebuilds: bool,
        inputs: Vec<InputInfo>,
        output_hooks: Option<TensorHooks>,
    ) -> Arc<SaveRecord> {
        Arc::new_cyclic(|me| SaveRecord {
            me: me.clone(),
            checkpoint,
            name,
            location,
            offload,
            rebuilds,
            inner: Mutex::new(RecordInner {
                inputs,
                output_hooks,
                ..RecordInner::default()
            }),
        })
    }

    /// The record's mutable part.
    pub(crate) fn inner(&self) -> MutexGuard<'_, RecordInner> {
        lock(&self.inner)
    }

    /// How many outputs the region returned (absent ones included).
    pub(crate) fn output_count(&self) -> usize {
        self.inner().outputs.len()
    }

    /// `checkpoint::region`.
    pub(crate) fn display(&self) -> String {
        region_path(self.checkpoint.as_deref(), &self.name)
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> Error {
        Error::Region {
            region: self.display(),
            message: message.into(),
        }
    }
}
