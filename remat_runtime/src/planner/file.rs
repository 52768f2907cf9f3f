//! Plan files: a plan as small, readable JSON, so that a run can be
//! reproduced and reviewed.
//!
//! Invariant: `from_json(to_json(p)) == p` for every plan (times are stored
//! in nanoseconds, as integers); a file is checked against the model only
//! with a profile ([`Plan::load_for`]), and the runtime refuses an active
//! plan that does not name a checkpoint or region the model runs.

use crate::error::{Error, Result};
use crate::planner::choice::Choice;
use crate::planner::cost::Profile;
use crate::planner::plan::{LayerPlan, Plan, Target};
use crate::planner::predict::Prediction;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The value of `format` in every plan file.
pub const PLAN_FORMAT: &str = "remat-plan/1";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    format: String,
    /// `kept` or `peak`.
    target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    budget_bytes: Option<i64>,
    predicted: FilePrediction,
    checkpoints: Vec<FileCheckpoint>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePrediction {
    kept_bytes: i64,
    peak_bytes: i64,
    replay_ns: u64,
    /// Absent in files written before plans had a spread.
    #[serde(default)]
    spread_ns: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCheckpoint {
    name: String,
    checkpoint: bool,
    /// Region name → `save` or `recompute` (in the model's order).
    regions: BTreeMap<String, FilePolicy>,
    /// The model's order of `regions` (a map is sorted by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    order: Vec<String>,
    /// The shapes of its inputs when profiled (absent: not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inputs: Option<Vec<Vec<i64>>>,
}

#[derive(Serialize, Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "lowercase")]
enum FilePolicy {
    Save,
    Recompute,
    /// `Policy::OFFLOAD` (docs/semantics.md, rule O1).
    Offload,
}

impl Plan {
    /// The plan as pretty-printed JSON.
    ///
    /// ```
    /// use remat_runtime::planner::{Choice, LayerPlan, Plan, Prediction, Target};
    /// let plan = Plan {
    ///     target: Target::Kept,
    ///     budget: Some(1 << 20),
    ///     layers: vec![LayerPlan {
    ///         name: "layers.0".into(),
    ///         regions: vec!["attention".into(), "mlp".into()],
    ///         choice: Choice { checkpointed: true, save: vec![true, false], offload: vec![false; 2] },
    ///         inputs: Some(vec![vec![2, 64, 128]]),
    ///     }],
    ///     predicted: Prediction { kept_bytes: 1000, peak_bytes: 2000, replay_ns: 5, spread_ns: 1 },
    /// };
    /// let json = plan.to_json();
    /// assert!(json.contains(r#""attention": "save""#));
    /// assert_eq!(Plan::from_json(&json).unwrap(), plan);
    /// ```
    pub fn to_json(&self) -> String {
        let file = PlanFile {
            format: PLAN_FORMAT.into(),
            target: match self.target {
                Target::Kept => "kept",
                Target::Peak => "peak",
            }
            .into(),
            budget_bytes: self.budget,
            predicted: FilePrediction {
                kept_bytes: self.predicted.kept_bytes,
                peak_bytes: self.predicted.peak_bytes,
                replay_ns: self.predicted.replay_ns,
                spread_ns: self.predicted.spread_ns,
            },
            checkpoints: self
                .layers
                .iter()
                .map(|l| {
                    let regions = l
                        .regions
                        .iter()
                        .enumerate()
                        .map(|(i, r)| {
                            let p = if l.choice.offloads(i) {
                                FilePolicy::Offload
                            } else if l.choice.save[i] {
                                FilePolicy::Save
                            } else {
                                FilePolicy::Recompute
                            };
                            (r.clone(), p)
                        })
                        .collect();
                    let mut sorted = l.regions.clone();
                    sorted.sort();
                    FileCheckpoint {
                        name: l.name.clone(),
                        checkpoint: l.choice.checkpointed,
                        regions,
                        order: if sorted == l.regions {
                            Vec::new()
                        } else {
                            l.regions.clone()
                        },
                        inputs: l.inputs.clone(),
                    }
                })
                .collect(),
        };
        let mut json = serde_json::to_string_pretty(&file).unwrap_or_default();
        json.push('\n');
        json
    }

    /// A plan from the JSON of [`Plan::to_json`]. Errors name the problem
    /// (line and column for bad JSON).
    ///
    /// ```
    /// let err = remat_runtime::planner::Plan::from_json(r#"{"format": "other"}"#).unwrap_err();
    /// assert!(err.to_string().contains("plan file"));
    /// ```
    pub fn from_json(json: &str) -> Result<Plan> {
        let file: PlanFile = serde_json::from_str(json)
            .map_err(|e| Error::Plan(format!("cannot read the plan file: {e}")))?;
        if file.format != PLAN_FORMAT {
            return Err(Error::Plan(format!(
                "the plan file's format is `{}`; this version reads `{PLAN_FORMAT}`",
                file.format
            )));
        }
        let target = match file.target.as_str() {
            "kept" => Target::Kept,
            "peak" => Target::Peak,
            other => {
                return Err(Error::Plan(format!(
                    "the plan file's target is `{other}`; expected `kept` or `peak`"
                )))
            }
        };
        let mut layers = Vec::new();
        for c in file.checkpoints {
            let regions: Vec<String> = if c.order.is_empty() {
                c.regions.keys().cloned().collect()
            } else {
                let mut sorted = c.order.clone();
                sorted.sort();
                if !sorted.iter().eq(c.regions.keys()) {
                    return Err(Error::Plan(format!(
                        "checkpoint `{}` in the plan file: `order` lists other regions than \
                         `regions`",
                        c.name
                    )));
                }
                c.order
            };
            let save = regions
                .iter()
                .map(|r| c.regions[r] != FilePolicy::Recompute)
                .collect();
            let offload = regions
                .iter()
                .map(|r| c.regions[r] == FilePolicy::Offload)
                .collect();
            layers.push(LayerPlan {
                name: c.name,
                regions,
                choice: Choice {
                    checkpointed: c.checkpoint,
                    save,
                    offload,
                },
                inputs: c.inputs,
            });
        }
        Ok(Plan {
            target,
            budget: file.budget_bytes,
            layers,
            predicted: Prediction {
                kept_bytes: file.predicted.kept_bytes,
                peak_bytes: file.predicted.peak_bytes,
                replay_ns: file.predicted.replay_ns,
                spread_ns: file.predicted.spread_ns,
            },
        })
    }

    /// Writes [`Plan::to_json`] to `path` (the name `PolicyTable::save_file`
    /// has too: `PolicyTable::save` is the `Save` policy).
    ///
    /// ```no_run
    /// # fn f(plan: &remat_runtime::planner::Plan) {
    /// plan.save_file("plan.json").unwrap();
    /// # }
    /// ```
    pub fn save_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json())
            .map_err(|e| Error::Plan(format!("cannot write {}: {e}", path.display())))
    }

    /// Reads a plan file (not checked against a model; see
    /// [`Plan::load_for`]).
    ///
    /// ```no_run
    /// let plan = remat_runtime::planner::Plan::load("plan.json").unwrap();
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<Plan> {
        let path = path.as_ref();
        let json = std::fs::read_to_string(path)
            .map_err(|e| Error::Plan(format!("cannot read {}: {e}", path.display())))?;
        Plan::from_json(&json).map_err(|e| match e {
            Error::Plan(m) => Error::Plan(format!("{}: {m}", path.display())),
            e => e,
        })
    }

    /// Reads a plan file and checks it against the model `profile`
    /// describes ([`Plan::check`]); the prediction is the profile's.
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// let plan = remat_runtime::planner::Plan::load_for("plan.json", profile).unwrap();
    /// # }
    /// ```
    pub fn load_for(path: impl AsRef<Path>, profile: &Profile) -> Result<Plan> {
        let path = path.as_ref();
        Plan::load(path)?.rebased(profile).map_err(|e| match e {
            Error::Plan(m) => Error::Plan(format!("{}: {m}", path.display())),
            e => e,
        })
    }
}
