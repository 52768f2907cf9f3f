//! A table's rules compiled for lookup: their patterns parsed (malformed
//! rules refused), the last-match-wins search, the decisions memoised per
//! name, and the record of which rules matched, reported once after the
//! first forward.
//!
//! docs/semantics.md, rules Q1, Q2 and Q4; errors E32 and E33.

use crate::checkpointing::auto::Rules;
use crate::error::{Error, Result};
use crate::policies::glob::Glob;
use crate::policies::nearest::nearest_note;
use crate::policies::rule::PolicyRule;
use crate::policy::Policy;
use crate::sync::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

#[derive(Debug)]
enum Compiled1 {
    Checkpoint(Glob, bool),
    Region(Glob, Glob, Policy),
}

#[derive(Debug, Default)]
struct Memo {
    checkpoints: HashMap<String, Option<bool>>,
    regions: HashMap<(String, String), Option<Policy>>,
    /// Names met, in order, for suggestions.
    seen_checkpoints: Vec<String>,
    seen_regions: Vec<String>,
}

/// A table ready to decide: parsed patterns, which rules matched, and the
/// decisions taken so far.
#[derive(Debug)]
pub(crate) struct Compiled {
    rules: Vec<PolicyRule>,
    parsed: Vec<Compiled1>,
    matched: Vec<AtomicBool>,
    /// Unmatched patterns are errors.
    pub(crate) strict: bool,
    /// A forward ran under it (some activation finished).
    pub(crate) ran: AtomicBool,
    /// Unmatched patterns were reported (once, after the first forward).
    reported: AtomicBool,
    memo: Mutex<Memo>,
}

impl Compiled {
    /// Parses `rules`; the error names the first malformed one.
    pub(crate) fn new(rules: &[PolicyRule], strict: bool) -> Result<Compiled> {
        let bad = |e: String| Error::Policy(e);
        let parsed = rules
            .iter()
            .map(|r| match r {
                PolicyRule::Checkpoint { pattern, enabled } => {
                    if pattern.contains("::") {
                        return Err(bad(format!(
                            "checkpoint pattern `{pattern}` contains `::`; a checkpoint rule \
                             names checkpoints only (region rules take `checkpoint::region`)"
                        )));
                    }
                    Ok(Compiled1::Checkpoint(
                        Glob::new(pattern).map_err(bad)?,
                        *enabled,
                    ))
                }
                PolicyRule::Region { pattern, policy } => {
                    if *policy == Policy::Auto {
                        return Err(bad(format!(
                            "region rule `{pattern}` gives `auto`; a rule decides `save`, \
                             `recompute` or `offload`"
                        )));
                    }
                    let (c, r) = pattern.split_once("::").unwrap_or(("*", pattern));
                    Ok(Compiled1::Region(
                        Glob::new(c).map_err(bad)?,
                        Glob::new(r).map_err(bad)?,
                        *policy,
                    ))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Compiled {
            rules: rules.to_vec(),
            matched: parsed.iter().map(|_| AtomicBool::new(false)).collect(),
            parsed,
            strict,
            ran: AtomicBool::new(false),
            reported: AtomicBool::new(false),
            memo: Mutex::new(Memo::default()),
        })
    }

    /// docs/semantics.md, rule Q2: the last matching rule wins; with `mark`,
    /// every matching rule counts as matched.
    pub(crate) fn winner_checkpoint(&self, name: &str, mark: bool) -> Option<bool> {
        let mut out = None;
        for (i, r) in self.parsed.iter().enumerate() {
            if let Compiled1::Checkpoint(g, on) = r {
                if g.matches(name) {
                    out = Some(*on);
                    if mark {
                        self.matched[i].store(true, Ordering::Relaxed);
                    }
                }
            }
        }
        out
    }

    /// The same for regions (rule Q2).
    pub(crate) fn winner_region(
        &self,
        checkpoint: &str,
        region: &str,
        mark: bool,
    ) -> Option<Policy> {
        let mut out = None;
        for (i, r) in self.parsed.iter().enumerate() {
            if let Compiled1::Region(c, g, p) = r {
                if c.matches(checkpoint) && g.matches(region) {
                    out = Some(*p);
                    if mark {
                        self.matched[i].store(true, Ordering::Relaxed);
                    }
                }
            }
        }
        out
    }

    /// The rules no name has matched so far.
    pub(crate) fn unmatched(&self) -> Vec<&PolicyRule> {
        self.rules
            .iter()
            .zip(&self.matched)
            .filter(|(_, m)| !m.load(Ordering::Relaxed))
            .map(|(r, _)| r)
            .collect()
    }

    /// docs/semantics.md, rule Q4: once, after the first forward.
    pub(crate) fn report(&self, strict: bool) -> Result<()> {
        self.ran.store(true, Ordering::SeqCst);
        if self.reported.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let unmatched = self.unmatched();
        if unmatched.is_empty() {
            return Ok(());
        }
        let memo = lock(&self.memo);
        let items: Vec<String> = unmatched
            .iter()
            .map(|r| {
                let known = match r {
                    PolicyRule::Checkpoint { .. } => &memo.seen_checkpoints,
                    PolicyRule::Region { .. } => &memo.seen_regions,
                };
                // A pattern without `::` names regions in every checkpoint:
                // suggest region names alone.
                let local = matches!(r, PolicyRule::Region { .. }) && !r.pattern().contains("::");
                let names = known.iter().map(|k| match k.split_once("::") {
                    Some((_, region)) if local => region,
                    _ => k.as_str(),
                });
                let note = nearest_note(r.pattern(), names);
                format!("`{r}`{note}")
            })
            .collect();
        let message = format!(
            "{} pattern(s) matched nothing in the first forward: {}; a table decides only \
             `auto()` checkpoints and `Policy::Auto` regions (the forward met {} `auto()` \
             checkpoint(s) and {} `auto` region(s))",
            items.len(),
            items.join(", "),
            memo.seen_checkpoints.len(),
            memo.seen_regions.len(),
        );
        if strict {
            Err(Error::Policy(message))
        } else {
            eprintln!("remat: warning: policy table: {message}");
            Ok(())
        }
    }
}

impl Rules for Compiled {
    fn checkpoint(&self, checkpoint: &str) -> Option<bool> {
        let mut memo = lock(&self.memo);
        if let Some(d) = memo.checkpoints.get(checkpoint) {
            return *d;
        }
        let d = self.winner_checkpoint(checkpoint, true);
        memo.checkpoints.insert(checkpoint.to_string(), d);
        memo.seen_checkpoints.push(checkpoint.to_string());
        d
    }

    fn region(&self, checkpoint: &str, region: &str) -> Option<Policy> {
        let mut memo = lock(&self.memo);
        let key = (checkpoint.to_string(), region.to_string());
        if let Some(d) = memo.regions.get(&key) {
            return *d;
        }
        let d = self.winner_region(checkpoint, region, true);
        memo.regions.insert(key, d);
        memo.seen_regions.push(format!("{checkpoint}::{region}"));
        d
    }
}
