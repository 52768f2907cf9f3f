//! Policies as configuration (docs/policies.md), public in
//! `remat::planner`: tables of rules that map
//! checkpoint and region names, by shell-style pattern, to what `auto()`
//! checkpoints and `Policy::Auto` regions do, their file format, and the
//! listing of the checkpoints and regions a model's forward meets.
//!
//! From the bottom up: `glob` (patterns), `nearest` (suggestions for names
//! that matched nothing), `table` (rules, precedence, activation), `plan` (a plan as a table), `listing` (what a forward offers), `file` (table files).

pub(crate) mod file;
pub(crate) mod glob;
pub(crate) mod listing;
pub(crate) mod nearest;
pub(crate) mod plan;
pub(crate) mod table;

pub use file::TABLE_FORMAT;
pub use listing::{regions, CheckpointEntry, RegionEntry, RegionList};
pub use table::{PolicyRule, PolicyTable, TableGuard};
