//! The whole-model report: what every live checkpoint keeps, plus (when
//! tracked) what autograd saved outside checkpoints, each storage billed once.
//!
//! Invariant: the report holds checkpoints and saves only weakly; building it
//! never keeps a graph alive.

use crate::bridge::{storage_nbytes, HookPair, Payload, StorageKey, WeakStorage};
use crate::checkpointing::state::CheckpointState;
use crate::diagnostics::format::{compact_names, human_bytes};
use crate::diagnostics::memory_report::{region_memory, RegionMemory};
use crate::hooks::saved_tensors::SavedTensorsHooks;
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
/// use remat_runtime::{saved_tensors_report, track_saved_tensors};
/// let w = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let (y, outside) = track_saved_tensors(|| (w.sin() * 2).sin()); // saves `w` and `w.sin() * 2`
/// assert_eq!(saved_tensors_report(Some(&outside)).outside_bytes(), Some(16)); // `w` is a parameter
/// y.sum(tch::Kind::Float).backward(); // frees the graph and its saves
/// assert_eq!(saved_tensors_report(Some(&outside)).outside_bytes(), Some(0));
/// ```
#[derive(Default)]
pub struct OutsideSaves {
    rows: Mutex<Vec<(WeakStorage, i64, Weak<()>)>>,
}

struct Tracker(Arc<OutsideSaves>);

/// Kept exactly as autograd would keep it, with a token whose life tells
/// that autograd still holds it.
struct Tracked(Tensor, #[allow(dead_code)] Arc<()>);

impl HookPair for Tracker {
    fn pack(&self, tensor: Tensor) -> Result<Payload, String> {
        self.pack_saved(tensor, false)
    }

    fn pack_saved(&self, tensor: Tensor, grad_leaf: bool) -> Result<Payload, String> {
        let token = Arc::new(());
        if !grad_leaf {
            if let Some(weak) = WeakStorage::new(&tensor) {
                lock(&self.0.rows).push((weak, storage_nbytes(&tensor), Arc::downgrade(&token)));
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
/// use remat_runtime::{saved_tensors_report, track_saved_tensors};
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
/// use remat_runtime::{checkpoint, region, saved_tensors_report, Policy};
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
    /// Its `Save` regions, with storages already billed to an earlier
    /// checkpoint removed.
    pub regions: Vec<RegionMemory>,
}

impl CheckpointMemory {
    /// Bytes billed to this checkpoint.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, saved_tensors_report, Policy};
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
/// use remat_runtime::{checkpoint, region, saved_tensors_report, Policy};
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
    outside: Option<(i64, usize)>,
}

impl SavedTensorsReport {
    /// Bytes kept by checkpoints.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, saved_tensors_report, Policy};
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

    /// Bytes saved outside checkpoints (`None` when not tracked).
    ///
    /// ```
    /// use remat_runtime::{saved_tensors_report, track_saved_tensors};
    /// let x = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let (y, outside) = track_saved_tensors(|| (&x * 2).exp()); // exp saves its result
    /// assert_eq!(saved_tensors_report(Some(&outside)).outside_bytes(), Some(16));
    /// assert_eq!(saved_tensors_report(None).outside_bytes(), None);
    /// ```
    pub fn outside_bytes(&self) -> Option<i64> {
        self.outside.map(|(b, _)| b)
    }

    /// Checkpoints with the same regions and storage sizes, grouped, with
    /// their names compacted (`layer.0-1`).
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, saved_tensors_report, Policy};
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
/// (each storage billed to the first that keeps it) plus, if given, the saves
/// outside checkpoints noted by [`track_saved_tensors`].
///
/// ```
/// use remat_runtime::{checkpoint, region, saved_tensors_report, track_saved_tensors, Policy};
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
    let states = CheckpointState::registered();
    let mut billed: HashSet<StorageKey> = HashSet::new();
    let checkpoints = states
        .iter()
        .map(|state| {
            let records = lock(&state.inner).order.clone();
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
                regions,
            }
        })
        .collect();
    let outside = outside.map(|o| {
        let rows = lock(&o.rows);
        let mut bytes = 0;
        let mut count = 0;
        for (weak, nbytes, held) in rows.iter() {
            if held.strong_count() > 0 && weak.is_alive() && billed.insert(weak.key()) {
                bytes += nbytes;
                count += 1;
            }
        }
        (bytes, count)
    });
    SavedTensorsReport {
        checkpoints,
        outside,
    }
}

impl fmt::Display for SavedTensorsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outside = match self.outside {
            Some((b, _)) => human_bytes(b),
            None => "not tracked (run the forward under track_saved_tensors)".to_string(),
        };
        let total = self.checkpoint_bytes() + self.outside.map_or(0, |(b, _)| b);
        writeln!(
            f,
            "saved for backward: {} -- {} checkpoint(s) {}, outside checkpoints {}",
            human_bytes(total),
            self.checkpoints.len(),
            human_bytes(self.checkpoint_bytes()),
            outside
        )?;
        writeln!(f, "checkpoints:")?;
        for (names, members) in self.groups() {
            let bytes: i64 = members.iter().map(|c| c.bytes()).sum();
            let count = if members.len() > 1 {
                format!("x{}  ", members.len())
            } else {
                String::new()
            };
            writeln!(f, "  {:>10}  {count}{names}", human_bytes(bytes))?;
            for r in &members[0].regions {
                let name = r.region.rsplit("::").next().unwrap_or(&r.region);
                let each = if members.len() > 1 { " each" } else { "" };
                writeln!(
                    f,
                    "    {:>10}  {name}: {} storage(s){each}, {} rebuilt, {} offloaded",
                    human_bytes(r.bytes()),
                    r.storages().count(),
                    r.rebuilt.len(),
                    r.offloaded
                )?;
            }
        }
        if let Some((b, n)) = self.outside {
            writeln!(
                f,
                "outside checkpoints: {} in {n} storage(s)",
                human_bytes(b)
            )?;
        }
        Ok(())
    }
}
