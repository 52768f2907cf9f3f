//! What the forward of one `Save` region records for its replay and its
//! reports: how each of its saves is kept (as is, rebuilt from an input, or
//! packed by the user's hooks), its outputs' metadata, and the outputs kept
//! for replay.
//!
//! Invariant: `outputs[i].slot` is `None` until a consumer asks for output `i`
//! (or it is resident anyway); once filled it is only emptied by serving it
//! on replay. Kept values are detached aliases: a record never holds a
//! `grad_fn`, so it cannot keep its graph alive.

use crate::bridge::{Dims, GeneratorsSnapshot, Payload, StorageKey, TensorMeta, WeakStorage};
use crate::checkpointing::save_region::offload::{OffloadStore, Offloaded};
use crate::checkpointing::save_region::saved_input::{InputInfo, ViewSpec};
use crate::error::Error;
use crate::hooks::state_hooks::Snapshots;
use crate::hooks::tensor_hooks::TensorHooks;
use std::any::Any;
use std::borrow::Cow;
use std::collections::HashSet;
use std::panic::Location;
use std::sync::{Arc, Mutex, Weak};
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
    pub inner: Mutex<RecordInner>,
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
    pub spec: Option<OutputSpec>,
    /// The value kept for replay: `None` until a consumer asks (or it is
    /// resident anyway); emptied only by serving it on replay.
    pub slot: Option<Slot>,
    /// A consumer asked for it (a `Recompute` region or
    /// `recompute_needs_tensor`), as opposed to kept because it is resident
    /// anyway. Strict recomputation serves only these.
    pub requested: bool,
    /// The storage of what the latest recomputation served for it, pinned
    /// so that its address names no other storage while the path check
    /// looks values up by it (docs/semantics.md, rule R11).
    pub served: Option<WeakStorage>,
}

pub(crate) struct OutputSpec {
    /// Taken in one crossing; a placeholder's spec is built from it only
    /// when replay serves one.
    pub meta: TensorMeta,
    /// Its storage, weakly: reports say when the output is gone.
    pub storage: Option<WeakStorage>,
}

/// A persisted output.
pub(crate) enum Slot {
    /// A detached alias and its version when kept.
    Resident { value: Tensor, version: u32 },
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

#[derive(Default)]
pub(crate) struct RecordInner {
    pub inputs: Vec<InputInfo>,
    pub exit_snapshots: Snapshots,
    /// The default generators at the region's exit, when something drew
    /// since the checkpoint's last snapshot of them (rule C14).
    pub exit_generators: Option<Arc<GeneratorsSnapshot>>,
    pub outputs: Vec<Output>,
    /// The lengths of the output's `Vec`s (`RegionOutput::into_parts`).
    pub layout: Vec<usize>,
    pub recipes: Vec<Recipe>,
    pub rebuilt: Vec<Option<Tensor>>,
    pub identity_storages: HashSet<StorageKey>,
    pub kept: Vec<KeptRow>,
    pub offloaded: usize,
    /// How many unnamed saves so far (the next is `saved.<unnamed>`).
    pub unnamed: usize,
    /// The user's hooks at region entry, for persisted outputs, and the
    /// context they captured at region exit.
    pub output_hooks: Option<TensorHooks>,
    pub output_context: Option<Arc<dyn Any + Send + Sync>>,
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
    /// How many outputs the region returned (absent ones included).
    pub(crate) fn output_count(&self) -> usize {
        crate::sync::lock(&self.inner).outputs.len()
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
