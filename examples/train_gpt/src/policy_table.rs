//! The run under a policy table (`--save`, `--offload`, `--recompute`,
//! `--policy-file`):
//! the table the options give, checked against the model's regions, and
//! `--list-regions`, the listing a table is written against
//! (docs/policies.md).
//!
//! Invariant: the rules are, in order, the file's, then every `--save`,
//! every `--offload`, then every `--recompute`: the last match wins, so the
//! command line overrides the file, `--offload` overrides `--save` and
//! `--recompute` both.

use crate::options::Options;
use remat::policies::{regions, PolicyTable, RegionList};
use tch::Tensor;

/// The table the options give; `None` without table options.
pub fn from_options(opts: &Options) -> Result<Option<PolicyTable>, String> {
    if !opts.has_table() {
        return Ok(None);
    }
    let mut table = match &opts.policy_file {
        Some(path) => PolicyTable::load(path).map_err(|e| e.to_string())?,
        None => PolicyTable::new(),
    };
    for p in &opts.save {
        table = table.save(p.clone());
    }
    for p in &opts.offload {
        table = table.offload(p.clone());
    }
    for p in &opts.recompute {
        table = table.recompute(p.clone());
    }
    Ok(Some(table))
}

/// The table, checked against what `forward` (under `ModelPolicy::Auto`)
/// meets: a rule that names nothing fails with the nearest names.
pub fn checked(opts: &Options, forward: impl FnMut() -> Tensor) -> Result<PolicyTable, String> {
    let table = from_options(opts)?.ok_or("no table options")?;
    let list = list(forward)?;
    table.check(&list).map_err(|e| e.to_string())?;
    eprintln!(
        "table: {} rule(s), checked against the model",
        table.rules().len()
    );
    for rule in table.rules() {
        eprintln!("  {rule}");
    }
    Ok(table)
}

/// What `--list-regions` prints.
pub fn list(forward: impl FnMut() -> Tensor) -> Result<RegionList, String> {
    regions(forward).map_err(|e| format!("listing the model's regions: {e}"))
}
