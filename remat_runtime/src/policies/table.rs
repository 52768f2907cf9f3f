//! `PolicyTable`: rules from name patterns to what `auto()` checkpoints and
//! `Policy::Auto` regions do, built rule by rule, the decisions it gives,
//! and its activation around a forward (`TableGuard`). One rule and its
//! text are in `rule.rs`; the rules parsed for lookup, with their
//! precedence (the last matching rule wins), in `compile.rs`.
//!
//! Invariants: a table's rules never change once it is compiled (its
//! builder methods return a new, uncompiled table), so one name always gets
//! the same decision, on the forward and in every replay; clones of a table
//! share its record of which rules matched, so the first forward of any of
//! them is the one whose unmatched patterns are reported.
//!
//! docs/semantics.md, rules Q1-Q5; errors E32 and E33 (files: Q6, E34).

use crate::checkpointing::auto::{self, ActiveGuard};
use crate::error::Result;
use crate::policies::compile::Compiled;
use crate::policy::Policy;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use crate::policies::rule::PolicyRule;

/// Rules mapping checkpoint and region names, by shell-style pattern, to
/// what `auto()` checkpoints and `Policy::Auto` regions do. Later rules
/// override earlier ones (write the general rule first, the exceptions
/// after); names no rule matches get the code's default (an `auto()`
/// checkpoint checkpoints, an `Auto` region recomputes). Fixed policies
/// (`Save`, `Recompute`, a checkpoint that is not `auto()`) are the code's
/// and no table changes them.
///
/// ```
/// use remat_runtime::policies::PolicyTable;
/// use remat_runtime::{checkpoint, recompute_needs_tensor, region, Policy};
/// let table = PolicyTable::new()
///     .save("layers.*::attention") // every layer keeps its attention
///     .recompute("layers.0::attention") // but the first
///     .checkpoint("layers.2", false); // and the last runs whole
/// assert_eq!(table.decide_region("layers.1", "attention"), Some(Policy::Save));
/// assert_eq!(table.decide_region("layers.0", "attention"), Some(Policy::Recompute));
/// assert_eq!(table.decide_region("layers.0", "mlp"), None); // the code's default
/// assert_eq!(table.decide_checkpoint("layers.2"), Some(false));
///
/// let x = tch::Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let loss = table
///     .scope(|| {
///         checkpoint("layers.1").auto().call(&x, |x| {
///             let h = region("attention", Policy::Auto).call(&x, |x| x.exp());
///             recompute_needs_tensor(&h);
///             h.sin().sum(tch::Kind::Float)
///         })
///     })
///     .unwrap(); // a warning: `layers.0::attention` and `layers.2` matched nothing
/// loss.backward();
/// ```
#[derive(Debug, Default)]
pub struct PolicyTable {
    rules: Vec<PolicyRule>,
    strict: bool,
    /// Shared by clones (made before or after the first activation);
    /// replaced by every builder method.
    compiled: Arc<OnceLock<Arc<Compiled>>>,
}

impl Clone for PolicyTable {
    fn clone(&self) -> Self {
        PolicyTable {
            rules: self.rules.clone(),
            strict: self.strict,
            compiled: self.compiled.clone(),
        }
    }
}

impl PartialEq for PolicyTable {
    fn eq(&self, other: &Self) -> bool {
        self.rules == other.rules && self.strict == other.strict
    }
}

impl PolicyTable {
    /// A table with no rules: every name gets the code's default.
    ///
    /// ```
    /// assert!(remat_runtime::policies::PolicyTable::new().rules().is_empty());
    /// ```
    pub fn new() -> PolicyTable {
        PolicyTable::default()
    }

    /// A table of `rules`, in order.
    ///
    /// ```
    /// use remat_runtime::policies::{PolicyTable, PolicyRule};
    /// let t = PolicyTable::from_rules(vec![PolicyRule::Checkpoint { pattern: "*".into(), enabled: false }]);
    /// assert_eq!(t.decide_checkpoint("layers.0"), Some(false));
    /// ```
    pub fn from_rules(rules: Vec<PolicyRule>) -> PolicyTable {
        PolicyTable {
            rules,
            ..PolicyTable::default()
        }
    }

    /// Adds `rule` after the others (so it overrides them where both match).
    ///
    /// ```
    /// use remat_runtime::policies::{PolicyTable, PolicyRule};
    /// use remat_runtime::Policy;
    /// let t = PolicyTable::new().rule(PolicyRule::Region { pattern: "mlp".into(), policy: Policy::Save });
    /// assert_eq!(t.decide_region("layers.7", "mlp"), Some(Policy::Save));
    /// ```
    pub fn rule(mut self, rule: PolicyRule) -> PolicyTable {
        self.rules.push(rule);
        self.compiled = Arc::default();
        self
    }

    /// Adds a rule: `Auto` regions matching `pattern` save.
    ///
    /// ```
    /// let t = remat_runtime::policies::PolicyTable::new().save("*::mlp.*");
    /// assert!(t.decide_region("layers.0", "mlp.up").is_some());
    /// ```
    pub fn save(self, pattern: impl Into<String>) -> PolicyTable {
        self.rule(PolicyRule::Region {
            pattern: pattern.into(),
            policy: Policy::Save,
        })
    }

    /// Adds a rule: `Auto` regions matching `pattern` recompute.
    ///
    /// ```
    /// use remat_runtime::Policy;
    /// let t = remat_runtime::policies::PolicyTable::new().save("*").recompute("mlp");
    /// assert_eq!(t.decide_region("layers.0", "mlp"), Some(Policy::Recompute));
    /// ```
    pub fn recompute(self, pattern: impl Into<String>) -> PolicyTable {
        self.rule(PolicyRule::Region {
            pattern: pattern.into(),
            policy: Policy::Recompute,
        })
    }

    /// Adds a rule: `Auto` regions matching `pattern` offload to the CPU
    /// (`Policy::OFFLOAD`; another target with [`PolicyTable::rule`]).
    ///
    /// ```
    /// use remat_runtime::Policy;
    /// let t = remat_runtime::policies::PolicyTable::new().save("*").offload("mlp.*");
    /// assert_eq!(t.decide_region("layers.0", "mlp.up"), Some(Policy::OFFLOAD));
    /// assert_eq!(t.decide_region("layers.0", "attention"), Some(Policy::Save));
    /// ```
    pub fn offload(self, pattern: impl Into<String>) -> PolicyTable {
        self.rule(PolicyRule::Region {
            pattern: pattern.into(),
            policy: Policy::OFFLOAD,
        })
    }

    /// JAX's `save_and_offload_only_these_names`: the `Auto` regions named
    /// by `save` save, those named by `offload` offload to the CPU, every
    /// other recomputes (an `offload` name overrides a `save` name).
    ///
    /// ```
    /// use remat_runtime::policies::PolicyTable;
    /// use remat_runtime::Policy;
    /// let t = PolicyTable::save_and_offload_only(["attention"], ["mlp.up"]);
    /// assert_eq!(t.decide_region("layers.0", "attention"), Some(Policy::Save));
    /// assert_eq!(t.decide_region("layers.0", "mlp.up"), Some(Policy::OFFLOAD));
    /// assert_eq!(t.decide_region("layers.0", "mlp.down"), Some(Policy::Recompute));
    /// ```
    pub fn save_and_offload_only<S: Into<String>, O: Into<String>>(
        save: impl IntoIterator<Item = S>,
        offload: impl IntoIterator<Item = O>,
    ) -> PolicyTable {
        let saved = save.into_iter().fold(
            PolicyTable::save_only(Vec::<String>::new()),
            PolicyTable::save,
        );
        offload.into_iter().fold(saved, PolicyTable::offload)
    }

    /// Adds a rule: `auto()` checkpoints matching `pattern` checkpoint
    /// (`true`) or run as plain code (`false`).
    ///
    /// ```
    /// let t = remat_runtime::policies::PolicyTable::new().checkpoint("layers.[0-3]", false);
    /// assert_eq!(t.decide_checkpoint("layers.3"), Some(false));
    /// assert_eq!(t.decide_checkpoint("layers.4"), None);
    /// ```
    pub fn checkpoint(self, pattern: impl Into<String>, enabled: bool) -> PolicyTable {
        self.rule(PolicyRule::Checkpoint {
            pattern: pattern.into(),
            enabled,
        })
    }

    /// JAX's `save_only_these_names`: the `Auto` regions named by `names`
    /// (patterns, as in [`PolicyTable::save`]) save, every other recomputes.
    ///
    /// ```
    /// use remat_runtime::policies::PolicyTable;
    /// use remat_runtime::Policy;
    /// let t = PolicyTable::save_only(["attention"]);
    /// assert_eq!(t.decide_region("layers.0", "attention"), Some(Policy::Save));
    /// assert_eq!(t.decide_region("layers.0", "mlp"), Some(Policy::Recompute));
    /// ```
    pub fn save_only<S: Into<String>>(names: impl IntoIterator<Item = S>) -> PolicyTable {
        names
            .into_iter()
            .fold(PolicyTable::new().recompute("*::*"), PolicyTable::save)
    }

    /// The converse: every `Auto` region saves but those named by `names`.
    ///
    /// ```
    /// use remat_runtime::policies::PolicyTable;
    /// use remat_runtime::Policy;
    /// let t = PolicyTable::save_all_but(["mlp"]);
    /// assert_eq!(t.decide_region("layers.0", "attention"), Some(Policy::Save));
    /// assert_eq!(t.decide_region("layers.0", "mlp"), Some(Policy::Recompute));
    /// ```
    pub fn save_all_but<S: Into<String>>(names: impl IntoIterator<Item = S>) -> PolicyTable {
        names
            .into_iter()
            .fold(PolicyTable::new().save("*::*"), PolicyTable::recompute)
    }

    /// With `true`, a pattern that matches nothing in the first forward is
    /// an error from [`PolicyTable::scope`] instead of a warning.
    ///
    /// ```
    /// assert!(remat_runtime::policies::PolicyTable::new().strict(true).is_strict());
    /// ```
    pub fn strict(mut self, strict: bool) -> PolicyTable {
        self.strict = strict;
        self.compiled = Arc::default();
        self
    }

    /// Whether unmatched patterns are errors.
    ///
    /// ```
    /// assert!(!remat_runtime::policies::PolicyTable::new().is_strict());
    /// ```
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// The rules, in order.
    ///
    /// ```
    /// let t = remat_runtime::policies::PolicyTable::new().save("mlp");
    /// assert_eq!(t.rules().len(), 1);
    /// ```
    pub fn rules(&self) -> &[PolicyRule] {
        &self.rules
    }

    /// Checks every pattern; the error names the first malformed one.
    ///
    /// ```
    /// let t = remat_runtime::policies::PolicyTable::new().save("layers.[0-3::mlp");
    /// assert!(t.validate().unwrap_err().to_string().contains("without its `]`"));
    /// ```
    pub fn validate(&self) -> Result<()> {
        self.compiled().map(|_| ())
    }

    /// What the table decides for the `auto()` checkpoint `checkpoint`
    /// (`None`: no rule matches; the checkpoint checkpoints). A malformed
    /// table decides nothing. Does not count as a match for reporting.
    ///
    /// ```
    /// let t = remat_runtime::policies::PolicyTable::new().checkpoint("*", false).checkpoint("layers.0", true);
    /// assert_eq!(t.decide_checkpoint("layers.0"), Some(true)); // the last match wins
    /// assert_eq!(t.decide_checkpoint("layers.1"), Some(false));
    /// ```
    pub fn decide_checkpoint(&self, checkpoint: &str) -> Option<bool> {
        let c = self.compiled().ok()?;
        c.winner_checkpoint(checkpoint, false)
    }

    /// What the table decides for the `Auto` region `region` of checkpoint
    /// `checkpoint` (`None`: no rule matches; the region recomputes).
    ///
    /// ```
    /// use remat_runtime::Policy;
    /// let t = remat_runtime::policies::PolicyTable::new().save("layers.*::attn*");
    /// assert_eq!(t.decide_region("layers.3", "attn.qkv"), Some(Policy::Save));
    /// assert_eq!(t.decide_region("head", "attn"), None);
    /// ```
    pub fn decide_region(&self, checkpoint: &str, region: &str) -> Option<Policy> {
        let c = self.compiled().ok()?;
        c.winner_region(checkpoint, region, false)
    }

    /// Makes this table decide `auto()` checkpoints and `Policy::Auto`
    /// regions started on this thread until the guard drops, as
    /// `Plan::activate` does for a plan (the innermost active table or plan
    /// wins). Fails on a malformed pattern.
    ///
    /// ```
    /// # fn f(table: &remat_runtime::policies::PolicyTable, forward: impl Fn() -> tch::Tensor) {
    /// let loss = {
    ///     let active = table.activate().unwrap();
    ///     let loss = forward();
    ///     active.finish().unwrap(); // reports patterns that matched nothing
    ///     loss
    /// };
    /// loss.backward();
    /// # }
    /// ```
    pub fn activate(&self) -> Result<TableGuard> {
        let compiled = self.compiled()?.clone();
        Ok(TableGuard {
            _active: auto::push_rules(compiled.clone()),
            compiled,
            finished: false,
        })
    }

    /// Runs `f` with this table active, then reports the patterns that
    /// matched nothing if this was the table's first forward: on stderr, or
    /// as the error under [`PolicyTable::strict`] (`f`'s result is dropped
    /// then).
    ///
    /// ```no_run
    /// # fn f(table: &remat_runtime::policies::PolicyTable, forward: impl Fn() -> tch::Tensor) {
    /// table.scope(|| forward()).unwrap().backward();
    /// # }
    /// ```
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> Result<R> {
        let active = self.activate()?;
        let out = f();
        active.finish()?;
        Ok(out)
    }

    /// The patterns that have matched nothing in the forwards this table
    /// (or a clone of it) ran so far, as `pattern: what`; empty before it
    /// ran.
    ///
    /// ```
    /// let t = remat_runtime::policies::PolicyTable::new().save("typo");
    /// t.scope(|| ()).unwrap();
    /// assert_eq!(t.unmatched(), ["typo: save"]);
    /// ```
    pub fn unmatched(&self) -> Vec<String> {
        match self.compiled() {
            Ok(c) if c.ran.load(Ordering::SeqCst) => {
                c.unmatched().iter().map(|r| r.to_string()).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Active without reporting anything (for the crate's own tables).
    pub(crate) fn push_quiet(&self) -> Result<ActiveGuard> {
        Ok(auto::push_rules(self.compiled()?.clone()))
    }

    fn compiled(&self) -> Result<&Arc<Compiled>> {
        if let Some(c) = self.compiled.get() {
            return Ok(c);
        }
        let c = Arc::new(Compiled::new(&self.rules, self.strict)?);
        Ok(self.compiled.get_or_init(|| c))
    }
}

/// Keeps a table active on this thread; see [`PolicyTable::activate`].
/// Dropped without [`TableGuard::finish`], it reports unmatched patterns
/// as a warning even under strict checking.
pub struct TableGuard {
    _active: ActiveGuard,
    compiled: Arc<Compiled>,
    finished: bool,
}

impl TableGuard {
    /// Ends the activation; after the table's first forward, reports the
    /// patterns that matched nothing (a warning on stderr, or under
    /// [`PolicyTable::strict`] an error naming them and the nearest names
    /// the forward met).
    ///
    /// ```
    /// let t = remat_runtime::policies::PolicyTable::new().save("typo").strict(true);
    /// let active = t.activate().unwrap();
    /// let err = active.finish().unwrap_err().to_string();
    /// assert!(err.starts_with("policy table: 1 pattern(s) matched nothing"), "{err}");
    /// ```
    pub fn finish(mut self) -> Result<()> {
        self.finished = true;
        self.compiled.report(self.compiled.strict)
    }
}

impl Drop for TableGuard {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.compiled.report(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::rule::{parse_policy, policy_text};
    use crate::{checkpoint, recompute_needs_tensor, region};
    use std::sync::atomic::AtomicUsize;
    use tch::{Kind, Tensor};

    #[test]
    fn the_last_matching_rule_wins() {
        let t = PolicyTable::new()
            .save("*::*")
            .recompute("layers.*::mlp")
            .save("layers.1::mlp");
        assert_eq!(t.decide_region("layers.0", "mlp"), Some(Policy::Recompute));
        assert_eq!(t.decide_region("layers.1", "mlp"), Some(Policy::Save));
        assert_eq!(t.decide_region("head", "mlp"), Some(Policy::Save));
        // Reversed, the general rule overrides the specific ones.
        let t = PolicyTable::new().save("layers.1::mlp").recompute("*::*");
        assert_eq!(t.decide_region("layers.1", "mlp"), Some(Policy::Recompute));
    }

    #[test]
    fn a_pattern_without_a_checkpoint_half_covers_every_checkpoint() {
        let t = PolicyTable::new().save("attention");
        assert_eq!(t.decide_region("layers.9", "attention"), Some(Policy::Save));
        assert_eq!(
            t.decide_region("encoder.0", "attention"),
            Some(Policy::Save)
        );
        assert_eq!(t.decide_region("layers.9", "attention.qkv"), None);
        let t = PolicyTable::new().save("attention.*");
        assert_eq!(t.decide_region("x", "attention.qkv"), Some(Policy::Save));
    }

    #[test]
    fn checkpoint_and_region_rules_are_decided_apart() {
        let t = PolicyTable::new()
            .checkpoint("layers.*", false)
            .save("layers.*::attention")
            .checkpoint("layers.[0-1]", true)
            .recompute("layers.1::*");
        assert_eq!(t.decide_checkpoint("layers.0"), Some(true));
        assert_eq!(t.decide_checkpoint("layers.1"), Some(true));
        assert_eq!(t.decide_checkpoint("layers.2"), Some(false));
        assert_eq!(t.decide_checkpoint("head"), None);
        // A region rule never decides a checkpoint, nor the other way.
        assert_eq!(t.decide_region("layers.0", "attention"), Some(Policy::Save));
        assert_eq!(
            t.decide_region("layers.1", "attention"),
            Some(Policy::Recompute)
        );
        assert_eq!(t.decide_region("layers.2", "attention"), Some(Policy::Save));
        assert_eq!(t.decide_region("layers.0", "mlp"), None);
    }

    #[test]
    fn helpers_are_tables() {
        let only = PolicyTable::save_only(["attention", "mlp.up"]);
        assert_eq!(
            only.rules(),
            PolicyTable::new()
                .recompute("*::*")
                .save("attention")
                .save("mlp.up")
                .rules()
        );
        let but = PolicyTable::save_all_but(["mlp.*"]);
        assert_eq!(but.decide_region("l", "mlp.up"), Some(Policy::Recompute));
        assert_eq!(but.decide_region("l", "attention"), Some(Policy::Save));
    }

    #[test]
    fn malformed_rules_are_refused() {
        let e = PolicyTable::new().checkpoint("a::b", true).validate();
        assert!(e.unwrap_err().to_string().contains("contains `::`"));
        let e = PolicyTable::new()
            .rule(PolicyRule::Region {
                pattern: "x".into(),
                policy: Policy::Auto,
            })
            .validate();
        assert!(e.unwrap_err().to_string().contains("gives `auto`"));
        let e = PolicyTable::new().save("[0-").activate().err().unwrap();
        assert_eq!(
            e.to_string(),
            "policy table: pattern `[0-` has a `[` without its `]`"
        );
    }

    /// A two-layer model counting how often each `auto` region runs: 1 for
    /// a save (the forward only), 2 for a recompute.
    fn run(table: &PolicyTable) -> (Vec<usize>, Result<()>) {
        let counts: Vec<Arc<AtomicUsize>> = (0..4).map(|_| Arc::new(AtomicUsize::new(0))).collect();
        let x = Tensor::ones([4], tch::kind::FLOAT_CPU).set_requires_grad(true);
        let active = table.activate().unwrap();
        let mut h = x.shallow_clone();
        for layer in 0..2 {
            let (a, m) = (counts[2 * layer].clone(), counts[2 * layer + 1].clone());
            h = checkpoint(format!("layers.{layer}"))
                .auto()
                .call(&h, move |h| {
                    let h = region("attention", Policy::Auto).call(&h, |h| {
                        a.fetch_add(1, Ordering::SeqCst);
                        h.exp()
                    });
                    recompute_needs_tensor(&h);
                    let h = region("mlp", Policy::Auto).call(&h, |h| {
                        m.fetch_add(1, Ordering::SeqCst);
                        h.sin()
                    });
                    recompute_needs_tensor(&h);
                    h * 2
                });
        }
        let report = active.finish();
        h.sum(Kind::Float).backward();
        (
            counts.iter().map(|c| c.load(Ordering::SeqCst)).collect(),
            report,
        )
    }

    #[test]
    fn an_active_table_decides_auto_checkpoints_and_regions() {
        // layers.0 attention saved; layers.1 whole (its regions run once:
        // plain calls); everything else recomputes.
        let t = PolicyTable::new()
            .save("layers.*::attention")
            .checkpoint("layers.1", false)
            .strict(true);
        let (counts, report) = run(&t);
        report.unwrap();
        assert_eq!(counts, [1, 2, 1, 1]);
        assert!(t.unmatched().is_empty());
        // No rule: the code's defaults (checkpointed, recomputed).
        let (counts, report) = run(&PolicyTable::new());
        report.unwrap();
        assert_eq!(counts, [2, 2, 2, 2]);
    }

    #[test]
    fn a_pattern_without_a_checkpoint_half_is_compared_with_region_names() {
        let t = PolicyTable::new().save("atention").strict(true);
        let err = run(&t).1.unwrap_err().to_string();
        assert!(
            err.contains("`atention: save` (nearest: `attention`)"),
            "{err}"
        );
    }

    #[test]
    fn unmatched_patterns_are_reported_after_the_first_forward() {
        let t = PolicyTable::new()
            .save("layers.*::atention")
            .checkpoint("layer.1", false)
            .save("mlp");
        assert!(t.unmatched().is_empty(), "nothing ran yet");
        let early = t.clone();
        let (_, report) = run(&t);
        report.unwrap(); // a warning only
        assert_eq!(t.unmatched(), ["layers.*::atention: save", "layer.1: off"]);
        // A clone made before the first forward shares its record.
        assert_eq!(early.unmatched(), t.unmatched());
        assert!(
            early.clone().save("x").unmatched().is_empty(),
            "a new table"
        );
        let strict = t.clone().strict(true);
        let (_, report) = run(&strict);
        let err = report.unwrap_err().to_string();
        assert_eq!(
            err,
            "policy table: 2 pattern(s) matched nothing in the first forward: \
             `layers.*::atention: save` (nearest: `layers.0::attention`, \
             `layers.1::attention`), `layer.1: off` (nearest: `layers.1`, `layers.0`); a \
             table decides only `auto()` checkpoints and `Policy::Auto` regions (the forward \
             met 2 `auto()` checkpoint(s) and 4 `auto` region(s))"
        );
        // Reported once: the second forward of the same table is quiet.
        let (_, report) = run(&strict);
        report.unwrap();
    }

    #[test]
    // docs/semantics.md, rules Q1 and O1: offload in rules and their text,
    // with a target device (their files: planner/table_file.rs).
    fn offload_rules_mix_with_the_others_and_round_trip() {
        let t = PolicyTable::new()
            .save("*::*")
            .offload("layers.[0-3]::mlp*")
            .rule(PolicyRule::Region {
                pattern: "layers.0::mlp.up".into(),
                policy: Policy::Offload(tch::Device::Cuda(1)),
            })
            .checkpoint("layers.3", false);
        assert_eq!(
            t.decide_region("layers.2", "mlp.down"),
            Some(Policy::OFFLOAD)
        );
        assert_eq!(
            t.decide_region("layers.0", "mlp.up"),
            Some(Policy::Offload(tch::Device::Cuda(1)))
        );
        assert_eq!(t.decide_region("layers.4", "mlp"), Some(Policy::Save));
        assert_eq!(t.decide_checkpoint("layers.3"), Some(false));
        assert_eq!(t.rules()[2].to_string(), "layers.0::mlp.up: offload:cuda:1");
        for text in [
            "save",
            "recompute",
            "offload",
            "offload:cpu",
            "offload:cuda:3",
        ] {
            let p = parse_policy(text).unwrap();
            assert_eq!(parse_policy(&policy_text(p)), Some(p), "{text}");
        }
    }
}
