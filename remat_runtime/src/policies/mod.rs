//! Policies as configuration (docs/policies.md): tables of rules that map
//! checkpoint and region names, by shell-style pattern, to what `auto()`
//! checkpoints and `Policy::Auto` regions do, and the listing of the
//! checkpoints and regions a model's forward meets; their files, which may
//! hold a plan (`table_file`), and a plan as the table that decides as it
//! does (`plan_table`). The folder sits above `planner/`, whose plans it
//! reads; the planner knows no table.
//!
//! From the bottom up: `glob` (patterns), `nearest` (suggestions for names
//! that matched nothing), `rule` (one rule and its text), `compile` (rules
//! parsed for lookup, precedence, unmatched patterns), `table` (building a
//! table, its decisions, activation), `listing` (what a forward offers),
//! `plan_table` (a plan's table), `table_file` (table files).

pub(crate) mod compile;
pub(crate) mod glob;
pub(crate) mod listing;
pub(crate) mod nearest;
pub(crate) mod plan_table;
pub(crate) mod rule;
pub(crate) mod table;
pub(crate) mod table_file;

pub use listing::{regions, CheckpointEntry, RegionEntry, RegionList};
pub use rule::PolicyRule;
pub use table::{PolicyTable, TableGuard};
pub use table_file::TABLE_FORMAT;
