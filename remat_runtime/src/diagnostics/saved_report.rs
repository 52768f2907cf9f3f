//! The whole-model report: what every live checkpoint keeps, plus (when
//! tracked) what autograd saved outside checkpoints, each storage billed once.
//!
//! Invariant: the report holds checkpoints and saves only weakly; building it
//! never keeps a graph alive (docs/semantics.md, rule D4).

use crate::bridge::{
    graph_nodes, storage_nbytes, HookPair, NodeId, Payload, SaveSite, StorageKey, WeakStorage,
};
use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::inputs::is_saving_inputs;
use crate::checkpointing::saved_tensors::SavedTensorsHooks;
use crate::diagnostics::format::{compact_names, human_bytes};
use crate::diagnostics::memory_report::{input_memory, region_memory, InputMemory, RegionMemory};
use crate::sync::lock;
use std::any::Any;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use tch::Tensor;

/// Saves made outside checkpoints while [`track_saved_tensors`] ran.
///
/// A row counts while autograd still holds the save (its payload is alive),
/// so what backward released, or a dropped graph, no longer counts.
/// Parameters (leaves that require grad) are not activation memory and are
/// not noted.
///
/// ```
/// use remat_runtime::{diagnostics::saved_tensors_report, diagnostics::track_saved_tensors};
/// let w = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let (y, outside) = track_saved_tensors(|| (w.sin() * 2).sin()); // saves `w` and `w.sin() * 2`
/// assert_eq!(saved_tensors_report(Some(&outside)).outside_bytes(), Some(16)); // `w` is a parameter
/// y.sum(tch::Kind::Float).backward(); // frees the graph and its saves
/// assert_eq!(saved_tensors_report(Some(&outside)).outside_bytes(), Some(0));
/// ```
#[derive(Default)]
pub struct OutsideSaves {
    rows: Mutex<Vec<OutsideRow>>,
}

/// One save outside checkpoints: its storage, the node that saved it, and a
/// token alive while autograd holds the save.
struct OutsideRow {
    storage: WeakStorage,
    nbytes: i64,
    node: Option<NodeId>,
    held: Weak<()>,
}

struct Tracker(Arc<OutsideSaves>);

/// Kept exactly as autograd would keep it, with a token whose life tells
/// that autograd still holds it.
struct Tracked(Tensor, #[allow(dead_code)] Arc<()>);

impl HookPair for Tracker {
    fn pack(&self, tensor: Tensor, site: SaveSite) -> Result<Payload, String> {
        let token = Arc::new(());
        // Parameters are not activation memory; checkpoint inputs are billed
        // to their checkpoint (from its own record).
        if !site.param && !is_saving_inputs() {
            if let Some(storage) = WeakStorage::new(&tensor) {
                lock(&self.0.rows).push(OutsideRow {
                    storage,
                    nbytes: storage_nbytes(&tensor),
                    node: site.node,
                    held: Arc::downgrade(&token),
                });
            }
        }
        Ok(Box::new(Tracked(tensor, token)))
    }

    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String> {
        payload
            .downcast_ref::<Tracked>()
            .map(|t| t.0.shallow_clone())
            .ok_or_else(|| "remat internal error: foreign payload in the save tracker".into())
    }
}

/// Runs `f` (a forward) noting every tensor autograd saves outside
/// checkpoints, for [`saved_tensors_report`]. What is saved is kept exactly as
/// without tracking.
///
/// ```
/// use remat_runtime::{diagnostics::saved_tensors_report, diagnostics::track_saved_tensors};
/// let x = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let (y, outside) = track_saved_tensors(|| (&x * 2).sin()); // sin saves `x * 2`
/// let report = saved_tensors_report(Some(&outside));
/// assert_eq!(report.outside_bytes(), Some(16));
/// ```
pub fn track_saved_tensors<R>(f: impl FnOnce() -> R) -> (R, Arc<OutsideSaves>) {
    let saves = Arc::new(OutsideSaves::default());
    let out = {
        let _tracking = SavedTensorsHooks::push(Some(Arc::new(Tracker(saves.clone()))));
        f()
    };
    (out, saves)
}

/// Region names with their storage sizes: equal for checkpoints that keep
/// the same things.
type Signature = Vec<(String, Vec<i64>)>;

/// One live checkpoint's share of a [`SavedTensorsReport`].
///
/// ```
/// use remat_runtime::{checkpoint, region, diagnostics::saved_tensors_report, Policy};
/// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("layer.0").call(&x, |x| region("exp", Policy::Save).call(&x, |x| x.exp()));
/// let report = saved_tensors_report(None);
/// let layer = &report.checkpoints[0];
/// assert_eq!(layer.checkpoint, "layer.0");
/// assert_eq!(layer.regions[0].region, "layer.0::exp");
/// ```
#[derive(Clone, Debug)]
pub struct CheckpointMemory {
    /// The checkpoint's name.
    pub checkpoint: String,
    /// Its inputs kept for replay, with storages already billed elsewhere
    /// removed (not counted in [`CheckpointMemory::bytes`]).
    pub inputs: InputMemory,
    /// Its `Save` regions, with storages already billed to an earlier
    /// checkpoint removed.
    pub regions: Vec<RegionMemory>,
}

impl CheckpointMemory {
    /// Bytes billed to this checkpoint.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, diagnostics::saved_tensors_report, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("layer.0").call(&x, |x| region("exp", Policy::Save).call(&x, |x| x.exp()));
    /// assert_eq!(saved_tensors_report(None).checkpoints[0].bytes(), 64); // the 4x4 f32 result
    /// drop(y); // the graph goes, and the checkpoint with it
    /// assert!(saved_tensors_report(None).checkpoints.is_empty());
    /// ```
    pub fn bytes(&self) -> i64 {
        self.regions.iter().map(RegionMemory::bytes).sum()
    }

    /// What makes two checkpoints "the same": region names and storage sizes.
    fn signature(&self) -> Signature {
        self.regions
            .iter()
            .map(|r| {
                let name = r
                    .region
                    .rsplit("::")
                    .next()
                    .unwrap_or(&r.region)
                    .to_string();
                let mut sizes: Vec<i64> = r.storages().map(|s| s.bytes).collect();
                sizes.sort_unstable();
                (name, sizes)
            })
            .collect()
    }
}

/// Everything saved for backward right now: every live checkpoint's `Save`
/// regions and, when tracked, the saves outside checkpoints.
///
/// Its `Display` is a summary with identical checkpoints grouped.
///
/// ```
/// use remat_runtime::{checkpoint, region, diagnostics::saved_tensors_report, Policy};
/// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("layer.0").call(&x, |x| region("exp", Policy::Save).call(&x, |x| x.exp()));
/// let report = saved_tensors_report(None);
/// assert_eq!(report.checkpoints.len(), 1);
/// assert!(report.to_string().starts_with("saved for backward: 64 B"));
/// ```
#[derive(Clone, Debug)]
pub struct SavedTensorsReport {
    /// Live checkpoints, in the order they ran.
    pub checkpoints: Vec<CheckpointMemory>,
    outside: Option<Outside>,
}

/// The saves outside checkpoints: totals and, when the graph was walked,
/// bytes and storage counts per autograd node name.
#[derive(Clone, Debug)]
struct Outside {
    bytes: i64,
    storages: usize,
    labels: Option<Vec<(String, i64, usize)>>,
}

impl SavedTensorsReport {
    /// Bytes kept by checkpoints.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, diagnostics::saved_tensors_report, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let layer = |name: &str, x: &tch::Tensor| {
    ///     checkpoint(name).call(x, |x| region("exp", Policy::Save).call(&x, |x| x.exp()))
    /// };
    /// let y = layer("layer.1", &layer("layer.0", &x));
    /// assert_eq!(saved_tensors_report(None).checkpoint_bytes(), 2 * 64);
    /// ```
    pub fn checkpoint_bytes(&self) -> i64 {
        self.checkpoints.iter().map(CheckpointMemory::bytes).sum()
    }

    /// Bytes `Offload` regions copied off their device (not in
    /// [`SavedTensorsReport::checkpoint_bytes`]).
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, diagnostics::saved_tensors_report, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("layer.0").call(&x, |x| region("exp", Policy::OFFLOAD).call(&x, |x| x.exp()));
    /// let report = saved_tensors_report(None);
    /// assert_eq!((report.checkpoint_bytes(), report.offloaded_bytes()), (0, 64));
    /// ```
    pub fn offloaded_bytes(&self) -> i64 {
        self.checkpoints
            .iter()
            .flat_map(|c| &c.regions)
            .map(RegionMemory::offloaded_bytes)
            .sum()
    }

    /// Bytes saved outside checkpoints (`None` when not tracked).
    ///
    /// ```
    /// use remat_runtime::{diagnostics::saved_tensors_report, diagnostics::track_saved_tensors};
    /// let x = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let (y, outside) = track_saved_tensors(|| (&x * 2).exp()); // exp saves its result
    /// assert_eq!(saved_tensors_report(Some(&outside)).outside_bytes(), Some(16));
    /// assert_eq!(saved_tensors_report(None).outside_bytes(), None);
    /// ```
    pub fn outside_bytes(&self) -> Option<i64> {
        self.outside.as_ref().map(|o| o.bytes)
    }

    /// Bytes of checkpoint inputs kept for replay (each storage once, and
    /// not counted again in [`SavedTensorsReport::outside_bytes`]).
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, diagnostics::saved_tensors_report, Policy};
    /// let w = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let x = &w * 2; // an activation, kept as the checkpoint's input
    /// let y = checkpoint("c").call(&x, |x| region("sin", Policy::Recompute).call(&x, |x| x.sin()));
    /// assert_eq!(saved_tensors_report(None).input_bytes(), 16);
    /// ```
    pub fn input_bytes(&self) -> i64 {
        self.checkpoints.iter().map(|c| c.inputs.bytes).sum()
    }

    /// Bytes saved outside checkpoints per autograd node name (largest
    /// first), with how many storages each holds; `None` unless tracked and
    /// given roots ([`saved_tensors_report_from`]).
    ///
    /// ```
    /// use remat_runtime::{diagnostics::saved_tensors_report_from, diagnostics::track_saved_tensors};
    /// let x = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let (y, outside) = track_saved_tensors(|| (&x * 2).exp()); // exp saves its result
    /// let report = saved_tensors_report_from(Some(&outside), &[&y]);
    /// assert_eq!(report.outside_by_node().unwrap(), [("ExpBackward0".to_string(), 16, 1)]);
    /// ```
    pub fn outside_by_node(&self) -> Option<&[(String, i64, usize)]> {
        self.outside.as_ref().and_then(|o| o.labels.as_deref())
    }

    /// Checkpoints with the same regions and storage sizes, grouped, with
    /// their names compacted (`layer.0-1`).
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, diagnostics::saved_tensors_report, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let layer = |name: &str, x: &tch::Tensor| {
    ///     checkpoint(name).call(x, |x| region("exp", Policy::Save).call(&x, |x| x.exp()))
    /// };
    /// let y = layer("layer.1", &layer("layer.0", &x));
    /// let report = saved_tensors_report(None);
    /// let groups = report.groups();
    /// assert_eq!(groups.len(), 1);
    /// assert_eq!((groups[0].0.as_str(), groups[0].1.len()), ("layer.0-1", 2));
    /// ```
    pub fn groups(&self) -> Vec<(String, Vec<&CheckpointMemory>)> {
        let mut groups: Vec<(Signature, Vec<&CheckpointMemory>)> = Vec::new();
        for c in &self.checkpoints {
            let sig = c.signature();
            match groups.iter_mut().find(|(s, _)| *s == sig) {
                Some((_, members)) => members.push(c),
                None => groups.push((sig, vec![c])),
            }
        }
        groups
            .into_iter()
            .map(|(_, m)| (compact_names(m.iter().map(|c| c.checkpoint.as_str())), m))
            .collect()
    }
}

/// What is saved for backward now: every live checkpoint's `Save` regions
/// and inputs (each storage billed to the first that keeps it) plus, if
/// given, the saves outside checkpoints noted by [`track_saved_tensors`].
///
/// ```
/// use remat_runtime::{checkpoint, region, diagnostics::saved_tensors_report, diagnostics::track_saved_tensors, Policy};
/// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let (loss, outside) = track_saved_tensors(|| {
///     let h = checkpoint("layer.0").call(&x, |x| region("exp", Policy::Save).call(&x, |x| x.exp()));
///     (&h * 2).sin().sum(tch::Kind::Float) // `sin` saves `h * 2` outside the checkpoint
/// });
/// let report = saved_tensors_report(Some(&outside));
/// assert_eq!((report.checkpoint_bytes(), report.outside_bytes()), (64, Some(64)));
/// println!("{report}");
/// loss.backward();
/// ```
pub fn saved_tensors_report(outside: Option<&OutsideSaves>) -> SavedTensorsReport {
    saved_tensors_report_from(outside, &[])
}

/// [`saved_tensors_report`], with the saves outside checkpoints labelled by
/// the autograd node that holds them (`AddmmBackward0 x2`), found by walking
/// the graph from `roots` (usually the loss). Call it before backward.
///
/// ```
/// use remat_runtime::{diagnostics::saved_tensors_report_from, diagnostics::track_saved_tensors};
/// let w = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let x = tch::Tensor::ones([2, 4], tch::kind::FLOAT_CPU);
/// let (loss, outside) = track_saved_tensors(|| (x.matmul(&w)).tanh().sum(tch::Kind::Float));
/// let report = saved_tensors_report_from(Some(&outside), &[&loss]);
/// assert!(report.to_string().contains("TanhBackward0 x1"));
/// ```
pub fn saved_tensors_report_from(
    outside: Option<&OutsideSaves>,
    roots: &[&Tensor],
) -> SavedTensorsReport {
    let states = CheckpointState::registered();
    let mut billed: HashSet<StorageKey> = HashSet::new();
    let mut checkpoints: Vec<CheckpointMemory> = states
        .iter()
        .map(|state| {
            let records = state.records().in_order();
            let regions = records
                .iter()
                .map(|r| {
                    let mut m = region_memory(r);
                    m.storages.retain(|(k, _)| billed.insert(*k));
                    m
                })
                .collect();
            CheckpointMemory {
                checkpoint: state.display_name().to_string(),
                inputs: InputMemory::default(),
                regions,
            }
        })
        .collect();
    // Inputs after every region: a storage a region keeps is billed there.
    for (c, state) in checkpoints.iter_mut().zip(&states) {
        c.inputs = input_memory(state, &mut billed);
    }
    let names = if roots.is_empty() || outside.is_none() {
        None
    } else {
        graph_nodes(roots).ok()
    };
    let outside = outside.map(|o| {
        let rows = lock(&o.rows);
        let (mut bytes, mut storages) = (0, 0);
        let mut labels: Vec<(String, i64, usize)> = Vec::new();
        for row in rows.iter() {
            if row.held.strong_count() > 0
                && row.storage.is_alive()
                && billed.insert(row.storage.key())
            {
                bytes += row.nbytes;
                storages += 1;
                if let Some(names) = &names {
                    let label = row
                        .node
                        .and_then(|n| names.get(&n).cloned())
                        .unwrap_or_else(|| "<node not reached from the roots>".into());
                    match labels.iter_mut().find(|(l, _, _)| *l == label) {
                        Some((_, b, n)) => {
                            *b += row.nbytes;
                            *n += 1;
                        }
                        None => labels.push((label, row.nbytes, 1)),
                    }
                }
            }
        }
        // Largest first; ties keep the order saves were made in.
        labels.sort_by_key(|(_, b, _)| std::cmp::Reverse(*b));
        Outside {
            bytes,
            storages,
            labels: names.as_ref().map(|_| labels),
        }
    });
    SavedTensorsReport {
        checkpoints,
        outside,
    }
}

impl fmt::Display for SavedTensorsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outside = match &self.outside {
            Some(o) => human_bytes(o.bytes),
            None => "not tracked (run the forward under track_saved_tensors)".to_string(),
        };
        let outside_bytes = self.outside_bytes().unwrap_or(0);
        let total = self.checkpoint_bytes() + self.input_bytes() + outside_bytes;
        writeln!(
            f,
            "saved for backward: {} -- {} checkpoint(s) {}, checkpoint inputs {}, outside \
             checkpoints {}",
            human_bytes(total),
            self.checkpoints.len(),
            human_bytes(self.checkpoint_bytes()),
            human_bytes(self.input_bytes()),
            outside
        )?;
        if self.offloaded_bytes() > 0 {
            writeln!(
                f,
                "offloaded by `offload` regions (not resident on their device): {}",
                human_bytes(self.offloaded_bytes())
            )?;
        }
        writeln!(f, "checkpoints:")?;
        for (names, members) in self.groups() {
            let bytes: i64 = members.iter().map(|c| c.bytes()).sum();
            let count = if members.len() > 1 {
                format!("x{}  ", members.len())
            } else {
                String::new()
            };
            writeln!(f, "  {:>10}  {count}{names}", human_bytes(bytes))?;
            let each = if members.len() > 1 { " each" } else { "" };
            for r in &members[0].regions {
                let name = r.region.rsplit("::").next().unwrap_or(&r.region);
                write!(
                    f,
                    "    {:>10}  {name}: {} storage(s){each}, {} rebuilt, {} packed by hooks",
                    human_bytes(r.bytes()),
                    r.storages().count(),
                    r.rebuilt.len(),
                    r.hook_packed
                )?;
                if r.offloaded_bytes() > 0 {
                    write!(
                        f,
                        ", {} moved off the device",
                        human_bytes(r.offloaded_bytes())
                    )?;
                }
                if !r.parameters.is_empty() {
                    write!(f, ", {} parameter(s) not counted", r.parameters.len())?;
                }
                if r.released {
                    write!(f, "  ! output no longer alive")?;
                }
                writeln!(f)?;
            }
        }
        let inputs: i64 = self.input_bytes();
        let storages: usize = self.checkpoints.iter().map(|c| c.inputs.storages).sum();
        let hook_packed: usize = self.checkpoints.iter().map(|c| c.inputs.hook_packed).sum();
        write!(
            f,
            "checkpoint inputs kept for replay: {} in {storages} storage(s)",
            human_bytes(inputs)
        )?;
        if hook_packed > 0 {
            write!(f, ", {hook_packed} packed by saved-tensor hooks")?;
        }
        writeln!(f)?;
        if let Some(o) = &self.outside {
            writeln!(
                f,
                "outside checkpoints: {} in {} storage(s)",
                human_bytes(o.bytes),
                o.storages
            )?;
            match &o.labels {
                Some(labels) => {
                    for (label, bytes, n) in labels {
                        writeln!(f, "  {:>10}  {label} x{n}", human_bytes(*bytes))?;
                    }
                }
                None if o.storages > 0 => {
                    writeln!(f, "  (by node: pass the loss to saved_tensors_report_from)")?
                }
                None => {}
            }
        }
        Ok(())
    }
}
