//! What a profile holds: per kind of planned checkpoint, each choice with
//! the bytes it keeps and the replay time it costs, as `profile` measures
//! them (the models of memory and time are in its docs) and the plan
//! solver reads them, and the levels of the baseline's backward
//! ([`BackwardLevels`], the model of the peak in backward.rs).

use crate::checkpointing::auto::DecisionTable;
use crate::diagnostics::format::human_bytes;
use crate::planner::choice::{decision_table, Choice};
use crate::planner::estimate::Estimate;
use std::fmt;

/// How many `Auto` regions one checkpoint may have (its choices are
/// enumerated: 2^R + 1 profiling runs per kind of checkpoint).
pub const MAX_AUTO_REGIONS: usize = 8;

/// One choice of a [`LayerKind`] with its predicted cost.
#[derive(Clone, Debug, PartialEq)]
pub struct ChoiceCost {
    /// What the checkpoint does.
    pub choice: Choice,
    /// Bytes kept at the forward→backward point, relative to the baseline
    /// (every planned checkpoint on, every `Auto` region recomputed).
    pub bytes: i64,
    /// Time it adds to a step, in nanoseconds: for a checkpointed choice,
    /// the kind's [`LayerKind::checkpoint_cost`] plus the
    /// [`LayerKind::region_cost`] of each region it recomputes (for a kind
    /// timed by its forward, less [`ChoiceCost::tail_ns`]); 0 when whole.
    pub replay_ns: u64,
    /// The spread of `replay_ns` (the sum of its terms' spreads), ns.
    pub spread_ns: u64,
    /// Bytes its replay rebuilds while the backward goes through it: what
    /// the block keeps whole minus what this choice keeps (0 when whole).
    pub working_set: i64,
    /// What this choice changes, against the baseline choice, in the most
    /// bytes in use while the backward is inside its block: what it keeps,
    /// what its replay rebuilds and what the replay allocates on the way.
    /// Measured on the kind's first member where the device says its bytes
    /// in use (docs/planner.md, "Peak during backward"); otherwise from the
    /// kept bytes alone (`bytes + working_set` less the baseline choice's).
    pub level_delta: i64,
    /// Forward time, ns, of the code after this choice's last save, which
    /// an early-stopped replay does not run (docs/semantics.md, rule C17).
    /// For a kind timed by its forward ([`LayerKind::replay_measured`]
    /// false) it is taken off `replay_ns`; measured replays already stopped
    /// there, so for them it only says what early stop saved. 0 for a
    /// checkpoint without early stop and when whole.
    pub tail_ns: u64,
    /// Bytes an offloading choice moves off the device (what the same
    /// choice without offload keeps more); 0 for the others. Its
    /// `replay_ns` includes copying them out and back at
    /// [`Profile::copy`]'s measured rate.
    pub moved_bytes: i64,
}

/// The measured cost of copying `bytes` off the model's device to the CPU
/// and back: what an offloading choice pays per byte it moves.
///
/// ```
/// use remat_runtime::planner::{CopyCost, Estimate};
/// let c = CopyCost { bytes: 1 << 20, cost: Estimate { ns: 100_000, spread_ns: 10_000 } };
/// assert_eq!(c.for_bytes(1 << 21).ns, 200_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CopyCost {
    /// The size copied.
    pub bytes: i64,
    /// Out and back, both directions together.
    pub cost: Estimate,
}

impl CopyCost {
    /// The cost of moving `bytes` out and back, at the measured rate.
    pub fn for_bytes(&self, bytes: i64) -> Estimate {
        let scale = |ns: u64| (ns as f64 * bytes.max(0) as f64 / self.bytes.max(1) as f64) as u64;
        Estimate {
            ns: scale(self.cost.ns),
            spread_ns: scale(self.cost.spread_ns),
        }
    }
}

/// Checkpoints that are alike (same `Auto` region names, same input
/// shapes, both `auto()` or neither): profiled once.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerKind {
    /// Its `Auto` regions, in forward order.
    pub regions: Vec<String>,
    /// Built with `auto()`: the plan may turn the checkpoint off.
    pub can_disable: bool,
    /// Shapes of its inputs.
    pub input_sizes: Vec<Vec<i64>>,
    /// Bytes its checkpoint keeps as inputs (distinct storages).
    pub input_bytes: i64,
    /// The planned checkpoints of this kind (indices into [`Profile::layers`]).
    pub members: Vec<usize>,
    /// Forward time of the whole closure (median), ns.
    pub body_ns: u64,
    /// Forward time of each `Auto` region body (median), ns.
    pub region_ns: Vec<u64>,
    /// Forward time of what replays under every choice: the closure minus
    /// its `Auto` regions and its fixed `Save` regions, ns.
    pub bare_ns: u64,
    /// What one block of this kind adds to a step when checkpointed with
    /// every `Auto` region saved: its replay (the bare code, and the hooks
    /// and bookkeeping of the replay itself).
    pub checkpoint_cost: Estimate,
    /// Per `Auto` region: what recomputing it instead of saving it adds
    /// to a step, per block.
    pub region_cost: Vec<Estimate>,
    /// Whether `checkpoint_cost` and `region_cost` come from replays timed
    /// inside the backward of measured steps (kinds a plan may turn off, in
    /// a model whose checkpoints' inputs need gradients) or, otherwise,
    /// from forward times of the bare code and the regions.
    pub replay_measured: bool,
    /// Bytes each `Auto` region adds when it alone is `Save` (its saves and
    /// the outputs kept for consumers).
    pub save_bytes: Vec<i64>,
    /// Bytes the block keeps when not checkpointed, its input included
    /// (`None` for a checkpoint that is not `auto()`).
    pub whole_bytes: Option<i64>,
    /// Every choice, as [`Choice::all`] orders them.
    pub choices: Vec<ChoiceCost>,
}

/// What [`profile`](crate::planner::profile()) measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Bytes kept at the forward→backward point with every planned
    /// checkpoint on and every `Auto` region recomputed (measured).
    pub baseline_bytes: i64,
    /// The planned checkpoints' names, in forward order.
    pub layers: Vec<String>,
    /// The kind of each layer (index into `kinds`).
    pub layer_kind: Vec<usize>,
    /// The distinct kinds.
    pub kinds: Vec<LayerKind>,
    /// Forward runs the profile took.
    pub runs: usize,
    /// With offload considered ([`profile_with_offload`](crate::planner::profile_with_offload)): the measured
    /// copy cost that offloading choices pay. `None`: no choice offloads.
    pub copy: Option<CopyCost>,
    /// Bytes of parameters gathered while any layer's backward runs, 0
    /// unless the model is sharded: `remat_distributed`'s
    /// `FullyShardedDataParallel::backward_gathered_peak` after a step (the
    /// unit in backward, the one prefetched, a root unit around them). They
    /// are alive beside every replay's working set, so the predicted peak
    /// and peak budgets count them.
    pub gathered_bytes: i64,
    /// The bytes in use during the baseline's backward, by where it was
    /// (measured by the profile; `None` where the device does not say its
    /// bytes in use: the predicted peak is then an upper estimate from the
    /// kept bytes alone).
    pub backward: Option<BackwardLevels>,
}

impl Profile {
    /// A profile of `layers` (each of kind `layer_kind[i]` of `kinds`)
    /// before any run: no copy, gathered or backward measure yet.
    pub(crate) fn unmeasured(
        baseline_bytes: i64,
        layers: Vec<String>,
        layer_kind: Vec<usize>,
        kinds: Vec<LayerKind>,
    ) -> Profile {
        Profile {
            baseline_bytes,
            layers,
            layer_kind,
            kinds,
            runs: 0,
            copy: None,
            gathered_bytes: 0,
            backward: None,
        }
    }

    /// The kind of the layer named `name`.
    ///
    /// ```no_run
    /// # fn f(p: &remat_runtime::planner::Profile) {
    /// let attention = &p.kind_of("layers.0").unwrap().regions[0];
    /// # }
    /// ```
    pub fn kind_of(&self, name: &str) -> Option<&LayerKind> {
        let i = self.layers.iter().position(|l| l == name)?;
        Some(&self.kinds[self.layer_kind[i]])
    }

    /// The runtime table for one choice index per layer.
    pub(crate) fn table(&self, describe: String, choices: &[usize]) -> DecisionTable {
        decision_table(
            describe,
            self.layers.iter().enumerate().map(|(i, name)| {
                let kind = &self.kinds[self.layer_kind[i]];
                (
                    name.as_str(),
                    kind.regions.as_slice(),
                    &kind.choices[choices[i]].choice,
                    // The profile's own forwards: the shapes are its.
                    None,
                )
            }),
        )
    }

    /// The index of the baseline choice in `kind`'s list.
    pub(crate) fn baseline_index(kind: &LayerKind) -> usize {
        usize::from(kind.can_disable)
    }

    /// The baseline's choice index per layer (every planned checkpoint on,
    /// every `Auto` region recomputed).
    pub(crate) fn baseline_choices(&self) -> Vec<usize> {
        self.layer_kind
            .iter()
            .map(|&k| Profile::baseline_index(&self.kinds[k]))
            .collect()
    }

    /// Per kind and choice but the baseline: the kind, the choice and the
    /// baseline with the kind's first member at that choice (how the
    /// profile measures a choice, the rest of the model as the baseline).
    pub(crate) fn one_changed(&self) -> Vec<(usize, usize, Vec<usize>)> {
        let baseline = self.baseline_choices();
        let mut out = Vec::new();
        for (k, kind) in self.kinds.iter().enumerate() {
            let rep = kind.members[0];
            for c in (0..kind.choices.len()).filter(|&c| c != baseline[rep]) {
                let mut choices = baseline.clone();
                choices[rep] = c;
                out.push((k, c, choices));
            }
        }
        out
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "profile: {} planned checkpoint(s) of {} kind(s), baseline {} kept, {} runs",
            self.layers.len(),
            self.kinds.len(),
            human_bytes(self.baseline_bytes),
            self.runs
        )?;
        for kind in &self.kinds {
            let names: Vec<&str> = kind
                .members
                .iter()
                .map(|&i| self.layers[i].as_str())
                .collect();
            writeln!(
                f,
                "  {} (x{}): inputs {}, whole {}, bare code {:.3} ms forward, checkpointed \
                 with all saved {} ({})",
                names.join(", "),
                names.len(),
                human_bytes(kind.input_bytes),
                kind.whole_bytes.map_or("-".into(), human_bytes),
                kind.bare_ns as f64 / 1e6,
                kind.checkpoint_cost,
                if kind.replay_measured {
                    "replays in backward"
                } else {
                    "forward times"
                }
            )?;
            for (r, name) in kind.regions.iter().enumerate() {
                writeln!(
                    f,
                    "    region {name}: save keeps +{}, body {:.3} ms forward, recompute {}",
                    human_bytes(kind.save_bytes[r]),
                    kind.region_ns[r] as f64 / 1e6,
                    kind.region_cost[r]
                )?;
            }
            for c in &kind.choices {
                writeln!(
                    f,
                    "    {:<36} {:>+12} B  replay {:>8.3} ± {:.3} ms  working set {}",
                    c.choice.to_string(),
                    c.bytes,
                    c.replay_ns as f64 / 1e6,
                    c.spread_ns as f64 / 1e6,
                    human_bytes(c.working_set)
                )?;
            }
        }
        Ok(())
    }
}

/// The most bytes in use while a backward ran, by where it was, in bytes
/// over the bytes in use before its forward, on the loss's device (the C
/// heap on the CPU, the caching allocator on CUDA); `None` where the
/// backward ran no node. [`Profile::backward`]
/// holds the baseline's (every planned checkpoint on, every `Auto` region
/// recomputed); [`measure_levels`](crate::planner::measure_levels) measures any forward's.
///
/// ```
/// use remat_runtime::planner::BackwardLevels;
/// // Two planned checkpoints: the backward peaks in the second; nothing
/// // runs between them.
/// let levels = BackwardLevels {
///     layers: vec![Some(300), Some(500)],
///     gaps: vec![Some(100), None, Some(400)],
/// };
/// assert_eq!(levels.most(), 500);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackwardLevels {
    /// Per planned checkpoint, in [`Profile::layers`]'s
    /// order: the most while the backward ran the nodes its forward made
    /// (its replay included).
    pub layers: Vec<Option<i64>>,
    /// Between checkpoints: `gaps[i]` is the most while the backward ran
    /// nodes made after checkpoint `i - 1` and before checkpoint `i`;
    /// `gaps[0]` before the first (the embeddings), `gaps[L]` after the
    /// last (the head and the loss, and the level the backward started
    /// at).
    pub gaps: Vec<Option<i64>>,
}

impl BackwardLevels {
    /// The most of all levels (0 for none).
    pub fn most(&self) -> i64 {
        self.layers
            .iter()
            .chain(&self.gaps)
            .flatten()
            .copied()
            .max()
            .unwrap_or(0)
    }

    /// Each level the least of two measures of it.
    pub(crate) fn least(self, other: &BackwardLevels) -> BackwardLevels {
        let min = |a: &[Option<i64>], b: &[Option<i64>]| -> Vec<Option<i64>> {
            a.iter()
                .zip(b)
                .map(|(x, y)| match (x, y) {
                    (Some(x), Some(y)) => Some(*x.min(y)),
                    (x, y) => x.or(*y),
                })
                .collect()
        };
        BackwardLevels {
            layers: min(&self.layers, &other.layers),
            gaps: min(&self.gaps, &other.gaps),
        }
    }
}
