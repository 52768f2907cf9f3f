//! `PolicyRule`, one rule of a policy table, and the text form that tables,
//! their files and listings share: `pattern: what`, with a policy written
//! as its word (`offload:DEVICE` off the CPU) and read back.
//!
//! docs/semantics.md, rule Q1 (what a rule maps).

use crate::diagnostics::device::{from_name, name_of};
use crate::policy::Policy;

/// One rule of a [`PolicyTable`](crate::policies::PolicyTable).
///
/// ```
/// use remat_runtime::policies::PolicyRule;
/// use remat_runtime::Policy;
/// let r = PolicyRule::Region { pattern: "layers.*::attention".into(), policy: Policy::Save };
/// assert_eq!(r.to_string(), "layers.*::attention: save");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyRule {
    /// `auto()` checkpoints whose name matches `pattern` checkpoint
    /// (`enabled`) or run as plain code.
    Checkpoint {
        /// A pattern over checkpoint names (no `::`).
        pattern: String,
        /// Whether they checkpoint.
        enabled: bool,
    },
    /// `Policy::Auto` regions whose qualified name `checkpoint::region`
    /// matches `pattern` get `policy`. A pattern without `::` is one over
    /// region names in every checkpoint (`mlp` is `*::mlp`).
    Region {
        /// `CHECKPOINT::REGION` patterns, or a `REGION` pattern.
        pattern: String,
        /// `Save`, `Recompute` or `Offload`.
        policy: Policy,
    },
}

impl PolicyRule {
    /// The pattern as written.
    ///
    /// ```
    /// let r = remat_runtime::policies::PolicyRule::Checkpoint { pattern: "layers.1".into(), enabled: false };
    /// assert_eq!(r.pattern(), "layers.1");
    /// ```
    pub fn pattern(&self) -> &str {
        match self {
            PolicyRule::Checkpoint { pattern, .. } | PolicyRule::Region { pattern, .. } => pattern,
        }
    }
}

impl std::fmt::Display for PolicyRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyRule::Checkpoint { pattern, enabled } => {
                let what = if *enabled { "checkpoint" } else { "off" };
                write!(f, "{pattern}: {what}")
            }
            PolicyRule::Region { pattern, policy } => {
                write!(f, "{pattern}: {}", policy_text(*policy))
            }
        }
    }
}

/// How tables, their files and listings write a policy: its word, and for
/// `Offload` to another device than the CPU, `offload:DEVICE` (`cuda:0`).
pub(crate) fn policy_text(policy: Policy) -> String {
    match policy {
        Policy::Offload(tch::Device::Cpu) => "offload".into(),
        Policy::Offload(device) => format!("offload:{}", name_of(device)),
        p => p.word().into(),
    }
}

/// The converse of [`policy_text`].
pub(crate) fn parse_policy(text: &str) -> Option<Policy> {
    match text {
        "save" => Some(Policy::Save),
        "recompute" => Some(Policy::Recompute),
        "auto" => Some(Policy::Auto),
        "offload" => Some(Policy::OFFLOAD),
        _ => text
            .strip_prefix("offload:")
            .and_then(from_name)
            .map(Policy::Offload),
    }
}
