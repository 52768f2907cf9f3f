//! Table files: a policy table as JSON, read back with validation against
//! a model's regions. A plan file (`remat-plan/1`, planner/file.rs) is read
//! as the table of its plan, so the planner's `plan.json` can be loaded,
//! edited into rules and loaded again.
//!
//! docs/semantics.md, rule Q6; error E34.
//!
//! Invariant: `from_json(to_json(t)) == t` for every table; a file checked
//! against a model ([`PolicyTable::check`]) has no rule that matches nothing
//! the model runs.

use crate::error::{Error, Result};
use crate::planner::Plan;
use crate::planner::PLAN_FORMAT;
use crate::policies::listing::RegionList;
use crate::policies::nearest::nearest_note;
use crate::policies::rule::{parse_policy, policy_text, PolicyRule};
use crate::policies::table::PolicyTable;
use crate::policy::Policy;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The value of `format` in every table file.
pub const TABLE_FORMAT: &str = "remat-policy/1";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    format: String,
    #[serde(default)]
    strict: bool,
    rules: Vec<FileRule>,
}

/// `{"checkpoint": PATTERN, "enabled": BOOL}` or
/// `{"region": PATTERN, "policy": "save" | "recompute" | "offload"}`
/// (`"offload:cuda:0"` for another target than the CPU).
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<String>,
}

#[derive(Deserialize)]
struct FormatOnly {
    format: Option<String>,
}

impl PolicyTable {
    /// The table as pretty-printed JSON (format `remat-policy/1`).
    ///
    /// ```
    /// use remat_runtime::policies::PolicyTable;
    /// let t = PolicyTable::new().checkpoint("layers.0", false).save("layers.*::attention");
    /// let json = t.to_json();
    /// assert!(json.contains(r#""region": "layers.*::attention""#), "{json}");
    /// assert_eq!(PolicyTable::from_json(&json).unwrap(), t);
    /// ```
    pub fn to_json(&self) -> String {
        let rules = self
            .rules()
            .iter()
            .map(|r| match r {
                PolicyRule::Checkpoint { pattern, enabled } => FileRule {
                    checkpoint: Some(pattern.clone()),
                    enabled: Some(*enabled),
                    ..FileRule::default()
                },
                PolicyRule::Region { pattern, policy } => FileRule {
                    region: Some(pattern.clone()),
                    policy: Some(policy_text(*policy)),
                    ..FileRule::default()
                },
            })
            .collect();
        let file = TableFile {
            format: TABLE_FORMAT.into(),
            strict: self.is_strict(),
            rules,
        };
        let mut json = serde_json::to_string_pretty(&file).unwrap_or_default();
        json.push('\n');
        json
    }

    /// A table from a table file's JSON, or from a plan file's (the plan's
    /// table, [`Plan::to_table`]). Errors name the problem: line and column
    /// for bad JSON, the rule for a bad rule, and malformed patterns.
    ///
    /// ```
    /// use remat_runtime::policies::PolicyTable;
    /// let t = PolicyTable::from_json(
    ///     r#"{"format": "remat-policy/1", "rules": [{"region": "mlp", "policy": "save"}]}"#,
    /// ).unwrap();
    /// assert_eq!(t, PolicyTable::new().save("mlp"));
    /// let err = PolicyTable::from_json(r#"{"format": "remat-policy/1", "rules": [{"region": "mlp"}]}"#);
    /// assert!(err.unwrap_err().to_string().contains("rule 1"));
    /// ```
    pub fn from_json(json: &str) -> Result<PolicyTable> {
        let read = |e: serde_json::Error| Error::Policy(format!("cannot read the table file: {e}"));
        let format = serde_json::from_str::<FormatOnly>(json)
            .map_err(read)?
            .format
            .unwrap_or_default();
        if format == PLAN_FORMAT {
            return Ok(Plan::from_json(json)?.to_table());
        }
        if format != TABLE_FORMAT {
            return Err(Error::Policy(format!(
                "the table file's format is `{format}`; this version reads `{TABLE_FORMAT}` \
                 (and plan files, `{PLAN_FORMAT}`)"
            )));
        }
        let file: TableFile = serde_json::from_str(json).map_err(read)?;
        let mut rules = Vec::new();
        for (i, r) in file.rules.into_iter().enumerate() {
            let bad =
                |what: &str| Error::Policy(format!("rule {} of the table file: {what}", i + 1));
            let rule = match r {
                FileRule {
                    checkpoint: Some(pattern),
                    enabled: Some(enabled),
                    region: None,
                    policy: None,
                } => PolicyRule::Checkpoint { pattern, enabled },
                FileRule {
                    region: Some(pattern),
                    policy: Some(policy),
                    checkpoint: None,
                    enabled: None,
                } => PolicyRule::Region {
                    pattern,
                    policy: match parse_policy(&policy) {
                        Some(p) if p != Policy::Auto => p,
                        _ => {
                            return Err(bad(&format!(
                                "policy `{policy}`; expected `save`, `recompute`, `offload` or \
                                 `offload:DEVICE` (`cpu`, `cuda:N`)"
                            )))
                        }
                    },
                },
                _ => {
                    return Err(bad(
                        "a rule is {\"checkpoint\": PATTERN, \"enabled\": true|false} or \
                         {\"region\": PATTERN, \"policy\": \"save\"|\"recompute\"|\"offload\"}",
                    ))
                }
            };
            rules.push(rule);
        }
        let table = PolicyTable::from_rules(rules).strict(file.strict);
        table.validate()?;
        Ok(table)
    }

    /// Writes [`PolicyTable::to_json`] to `path`.
    ///
    /// ```no_run
    /// # fn f(t: &remat_runtime::policies::PolicyTable) {
    /// t.save_file("policy.json").unwrap();
    /// # }
    /// ```
    pub fn save_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json())
            .map_err(|e| Error::Policy(format!("cannot write {}: {e}", path.display())))
    }

    /// Reads a table file or a plan file (not checked against a model;
    /// see [`PolicyTable::load_for`]).
    ///
    /// ```no_run
    /// let t = remat_runtime::policies::PolicyTable::load("policy.json").unwrap();
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<PolicyTable> {
        let path = path.as_ref();
        let json = std::fs::read_to_string(path)
            .map_err(|e| Error::Policy(format!("cannot read {}: {e}", path.display())))?;
        PolicyTable::from_json(&json).map_err(|e| in_file(path, e))
    }

    /// Reads a table or plan file and checks it against the model `list`
    /// describes ([`PolicyTable::check`]).
    ///
    /// ```no_run
    /// # fn f(list: &remat_runtime::policies::RegionList) {
    /// let t = remat_runtime::policies::PolicyTable::load_for("policy.json", list).unwrap();
    /// # }
    /// ```
    pub fn load_for(path: impl AsRef<Path>, list: &RegionList) -> Result<PolicyTable> {
        let path = path.as_ref();
        let table = PolicyTable::load(path)?;
        table.check(list).map_err(|e| in_file(path, e))?;
        Ok(table)
    }

    /// Checks every rule against the model's checkpoints and regions (from
    /// [`regions`](crate::policies::regions)): a checkpoint rule must match
    /// an `auto()` checkpoint, a region rule an `Auto` region. The error
    /// names every rule that matches nothing, with the nearest names the
    /// model has.
    ///
    /// ```
    /// use remat_runtime::policies::{CheckpointEntry, PolicyTable, RegionEntry, RegionList};
    /// use remat_runtime::Policy;
    /// let list = RegionList {
    ///     checkpoints: vec![CheckpointEntry {
    ///         name: "layers.0".into(),
    ///         auto: true,
    ///         checkpointed: true,
    ///         regions: vec![RegionEntry {
    ///             name: "mlp".into(),
    ///             qualified: "layers.0::mlp".into(),
    ///             declared: Policy::Auto,
    ///             policy: Policy::Recompute,
    ///             save_bytes: Some(1024),
    ///         }],
    ///     }],
    /// };
    /// assert!(PolicyTable::new().save("mlp").check(&list).is_ok());
    /// let err = PolicyTable::new().save("layers.0::mpl").check(&list).unwrap_err();
    /// assert!(err.to_string().contains("(nearest: `layers.0::mlp`)"), "{err}");
    /// ```
    pub fn check(&self, list: &RegionList) -> Result<()> {
        self.validate()?;
        let checkpoints: Vec<&str> = list
            .checkpoints
            .iter()
            .filter(|c| c.auto)
            .map(|c| c.name.as_str())
            .collect();
        let regions: Vec<(&str, &str, &str)> = list
            .checkpoints
            .iter()
            .flat_map(|c| {
                c.regions
                    .iter()
                    .filter(|r| r.declared == Policy::Auto)
                    .map(move |r| (c.name.as_str(), r.name.as_str(), r.qualified.as_str()))
            })
            .collect();
        let mut unknown = Vec::new();
        for rule in self.rules() {
            let alone = PolicyTable::from_rules(vec![rule.clone()]);
            let (hit, known): (bool, Vec<&str>) = match rule {
                PolicyRule::Checkpoint { .. } => (
                    checkpoints
                        .iter()
                        .any(|c| alone.decide_checkpoint(c).is_some()),
                    checkpoints.clone(),
                ),
                PolicyRule::Region { .. } => (
                    regions
                        .iter()
                        .any(|(c, r, _)| alone.decide_region(c, r).is_some()),
                    // A pattern without `::` names regions in every checkpoint:
                    // suggest region names alone.
                    if rule.pattern().contains("::") {
                        regions.iter().map(|(_, _, q)| *q).collect()
                    } else {
                        regions.iter().map(|(_, r, _)| *r).collect()
                    },
                ),
            };
            if !hit {
                let note = nearest_note(rule.pattern(), known.iter().copied());
                unknown.push(format!("`{rule}`{note}"));
            }
        }
        if unknown.is_empty() {
            return Ok(());
        }
        Err(Error::Policy(format!(
            "{} rule(s) match nothing in the model: {}; the model has {} `auto()` \
             checkpoint(s) and {} `auto` region(s) (`policies::regions` lists them)",
            unknown.len(),
            unknown.join(", "),
            checkpoints.len(),
            regions.len()
        )))
    }
}

fn in_file(path: &Path, e: Error) -> Error {
    match e {
        Error::Policy(m) | Error::Plan(m) => Error::Policy(format!("{}: {m}", path.display())),
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use crate::policies::rule::PolicyRule;
    use crate::policies::table::PolicyTable;
    use crate::policy::Policy;

    #[test]
    // docs/semantics.md, rules Q1, Q6 and O1: offload rules with a target
    // device round-trip through a table file; a bad target is refused.
    fn offload_rules_round_trip_through_a_file_and_a_bad_target_is_refused() {
        let t = PolicyTable::new()
            .offload("*::mlp")
            .rule(PolicyRule::Region {
                pattern: "layers.0::mlp".into(),
                policy: Policy::Offload(tch::Device::Cuda(1)),
            });
        let json = t.to_json();
        assert!(json.contains(r#""policy": "offload:cuda:1""#), "{json}");
        assert_eq!(PolicyTable::from_json(&json).unwrap(), t);
        let err = PolicyTable::from_json(
            r#"{"format": "remat-policy/1", "rules": [{"region": "mlp", "policy": "offload:gpu"}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(
                "policy `offload:gpu`; expected `save`, `recompute`, `offload` or `offload:DEVICE`"
            ),
            "{err}"
        );
    }
}
