//! The memory-budget planner (docs/planner.md): profile a model's forward,
//! choose per checkpoint whether to checkpoint and which `Auto` regions
//! save under a byte budget, and apply the plan at run time.
//!
//! From the bottom up: `choice` (one way to run a checkpoint), `estimate`
//! (a measured time with its spread), `cost` (what a profile holds: each
//! choice's bytes and time, the backward's levels), `backward` (the model
//! of the peak: measuring the levels, predicting a plan's), `predict` (what
//! a plan costs in all), `profile` (measuring them), `calibrate` (their
//! times, as replays), `front` (the exact search over layers), `solve`
//! (what a budget gets: the fastest plan, then the tie rule's pick), `plan`
//! (the plan, its prediction and activation) and `file` (plan files).
//! Policy tables, the configuration form of a plan, are `crate::policies`
//! (docs/policies.md), which sits above this folder: a plan as a table and
//! table files (which may hold a plan) are there, and the planner knows no
//! table.

pub(crate) mod backward;
pub(crate) mod calibrate;
pub(crate) mod choice;
pub(crate) mod cost;
pub(crate) mod estimate;
pub(crate) mod file;
mod front;
pub(crate) mod plan;
pub(crate) mod predict;
pub(crate) mod profile;
mod solve;

pub use backward::{measure_levels, peak_tolerance, predict_levels};
pub use calibrate::MODEL_ERROR;
pub use choice::Choice;
pub use cost::{BackwardLevels, ChoiceCost, CopyCost, LayerKind, Profile, MAX_AUTO_REGIONS};
pub use estimate::Estimate;
pub use file::PLAN_FORMAT;
pub use plan::{LayerPlan, Plan, PlanGuard, Target};
pub use predict::{predict, Prediction};
pub use profile::{measure_kept_bytes, profile, profile_with, profile_with_offload};
