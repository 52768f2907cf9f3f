//! Policies as configuration (docs/policies.md): tables of rules that map
//! checkpoint and region names, by shell-style pattern, to what `auto()`
//! checkpoints and `Policy::Auto` regions do, and the listing of the
//! checkpoints and regions a model's forward meets. Their files, which may
//! hold a plan, are the planner's (`planner/table_file.rs`), as is turning
//! a plan into a table (`planner/to_table.rs`): this folder knows no plan.
//!
//! From the bottom up: `glob` (patterns), `nearest` (suggestions for names
//! that matched nothing), `rule` (one rule and its text), `compile` (rules
//! parsed for lookup, precedence, unmatched patterns), `table` (building a
//! table, its decisions, activation), `listing` (what a forward offers).

pub(crate) mod compile;
pub(crate) mod glob;
pub(crate) mod listing;
pub(crate) mod nearest;
pub(crate) mod rule;
pub(crate) mod table;

pub use listing::{regions, CheckpointEntry, RegionEntry, RegionList};
pub use rule::PolicyRule;
pub use table::{PolicyTable, TableGuard};
