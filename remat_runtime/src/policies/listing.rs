//! `regions(forward)`: what a model offers a policy table: every checkpoint
//! and region one forward meets, in order, with its policy now and the
//! bytes it keeps when saved.
//!
//! Two forwards, no backward: the first with nothing active (every
//! `auto()` checkpoint on, so that every region is met) records the
//! structure; the second, under a table saving every `Auto` region, reads
//! what each region keeps from the whole-model report. "Now" is what the
//! table or plan active on the calling thread decides.
//!
//! Invariant: leaves no table active and no gradient accumulated; the
//! listing's names are exactly those a table's rules match (Q1).

use crate::checkpointing::auto;
use crate::diagnostics::format::human_bytes;
use crate::diagnostics::saved_report::{saved_tensors_report, track_saved_tensors};
use crate::error::{Error, Result};
use crate::policies::rule::policy_text;
use crate::policies::table::PolicyTable;
use crate::policy::Policy;
use crate::recorders::timing::{record_into, ProfileSink};
use crate::sync::lock;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use tch::Tensor;

/// One region a forward met; see [`regions`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionEntry {
    /// Its name in its checkpoint.
    pub name: String,
    /// `checkpoint::region`: what table rules match.
    pub qualified: String,
    /// As written in the code (`Auto` for a region a table decides).
    pub declared: Policy,
    /// What it does now, under the table or plan active on the calling
    /// thread (the code's default without one).
    pub policy: Policy,
    /// Bytes it keeps at the forward→backward point when saved (every
    /// `Auto` region saved, each storage billed once, as the whole-model
    /// report bills them); `None` for a region the code fixes to
    /// `Recompute`.
    pub save_bytes: Option<i64>,
}

/// One checkpoint a forward met; see [`regions`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointEntry {
    /// Its name (`<unnamed>` without one).
    pub name: String,
    /// Built with `auto()`: a table may turn it off.
    pub auto: bool,
    /// Whether it checkpoints now (under the active table or plan).
    pub checkpointed: bool,
    /// Its regions, in forward order.
    pub regions: Vec<RegionEntry>,
}

/// What [`regions`] found. Its `Display` is a table, one line per
/// checkpoint and region.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionList {
    /// In forward order.
    pub checkpoints: Vec<CheckpointEntry>,
}

impl RegionList {
    /// Every region's qualified name, in order.
    ///
    /// ```
    /// let list = remat_runtime::policies::RegionList::default();
    /// assert!(list.qualified_names().is_empty());
    /// ```
    pub fn qualified_names(&self) -> Vec<&str> {
        self.checkpoints
            .iter()
            .flat_map(|c| c.regions.iter().map(|r| r.qualified.as_str()))
            .collect()
    }
}

/// Runs `forward` (it returns the loss; a graph not backpropagated) twice
/// and lists every checkpoint and region it met; see [`RegionList`].
/// Checkpoint names must be unique in the forward.
///
/// ```
/// use remat_runtime::{checkpoint, policies, recompute_needs_tensor, region, Policy};
/// let w = tch::Tensor::ones([8, 8], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let forward = || {
///     let w = w.shallow_clone();
///     checkpoint("layers.0").auto().call(&w, |w| {
///         let h = region("exp", Policy::Auto).call(&w, |w| (w * 2).exp());
///         recompute_needs_tensor(&h);
///         region("sin", Policy::Recompute).call(&h, |h| h.sin()).sum(tch::Kind::Float)
///     })
/// };
/// let list = policies::regions(forward).unwrap();
/// let layer = &list.checkpoints[0];
/// assert_eq!((layer.name.as_str(), layer.auto, layer.checkpointed), ("layers.0", true, true));
/// assert_eq!(layer.regions[0].qualified, "layers.0::exp");
/// assert_eq!(layer.regions[0].policy, Policy::Recompute); // no table active
/// assert_eq!(layer.regions[0].save_bytes, Some(256)); // its 8x8 f32 result
/// assert_eq!(layer.regions[1].save_bytes, None); // fixed by the code
/// ```
pub fn regions(mut forward: impl FnMut() -> Tensor) -> Result<RegionList> {
    let sink = Arc::new(ProfileSink::default());
    {
        let _none = auto::push(None);
        let _sink = record_into(sink.clone());
        drop(forward());
    }
    let calls: Vec<_> = lock(&sink.calls).iter().map(|c| lock(c).clone()).collect();
    let mut list = RegionList::default();
    for call in calls {
        let name = call.name.unwrap_or_else(|| "<unnamed>".into());
        if list.checkpoints.iter().any(|c| c.name == name) {
            return Err(Error::Policy(format!(
                "checkpoint `{name}` ran twice in one forward; tables name checkpoints, so \
                 each needs a name of its own"
            )));
        }
        // What the caller's active table or plan decides (its own rules).
        let now = auto::resolve(Some(&name));
        let checkpointed = !call.auto || now.checkpointed(&name).unwrap_or(true);
        let regions = call
            .regions
            .iter()
            .map(|r| RegionEntry {
                qualified: format!("{name}::{}", r.name),
                name: r.name.clone(),
                declared: r.declared,
                policy: match r.declared {
                    Policy::Auto => now.region(&name, &r.name).unwrap_or(Policy::Recompute),
                    p => p,
                },
                save_bytes: None,
            })
            .collect();
        list.checkpoints.push(CheckpointEntry {
            name,
            auto: call.auto,
            checkpointed,
            regions,
        });
    }
    let all_saved = PolicyTable::new().save("*::*");
    let bytes: HashMap<String, i64> = {
        let _saved = all_saved.push_quiet()?;
        let (loss, outside) = track_saved_tensors(&mut forward);
        let report = saved_tensors_report(Some(&outside));
        drop(loss);
        report
            .checkpoints
            .iter()
            .flat_map(|c| c.regions.iter().map(|r| (r.region.clone(), r.bytes())))
            .collect()
    };
    for r in list
        .checkpoints
        .iter_mut()
        .flat_map(|c| c.regions.iter_mut())
    {
        if r.declared != Policy::Recompute {
            r.save_bytes = Some(bytes.get(&r.qualified).copied().unwrap_or(0));
        }
    }
    Ok(list)
}

impl fmt::Display for RegionList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<32} {:<10} {:<10} {:>14}",
            "checkpoint / region", "declared", "now", "kept if saved"
        )?;
        for c in &self.checkpoints {
            let declared = if c.auto { "auto()" } else { "fixed" };
            let now = if c.checkpointed { "on" } else { "off" };
            writeln!(f, "{:<32} {declared:<10} {now}", c.name)?;
            for r in &c.regions {
                writeln!(
                    f,
                    "  {:<30} {:<10} {:<10} {:>14}",
                    r.qualified,
                    policy_text(r.declared),
                    policy_text(r.policy),
                    r.save_bytes.map_or("-".into(), human_bytes)
                )?;
            }
        }
        Ok(())
    }
}
