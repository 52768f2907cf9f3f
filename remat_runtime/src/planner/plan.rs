//! `Plan`: per planned checkpoint, whether it checkpoints and which `Auto`
//! regions save, chosen exactly for a byte budget (by solve.rs, over the
//! front search of front.rs); its prediction and its activation.
//!
//! Invariant: a plan's `predicted` is always what [`predict`] says for its
//! choices under the profile it was made or checked against.

use crate::checkpointing::auto::{self, ActiveGuard};
use crate::diagnostics::format::human_bytes;
use crate::error::{Error, Result};
use crate::planner::choice::{decision_table, Choice};
use crate::planner::cost::Profile;
use crate::planner::predict::{predict, Prediction};
use crate::planner::solve;
use crate::policy::Policy;
use std::fmt;
use std::sync::Arc;

/// What a budget bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Bytes kept at the forward→backward point.
    Kept,
    /// Predicted peak during backward (`Prediction::peak_bytes`: the
    /// baseline's measured level at each point of the backward plus what
    /// the plan keeps more in the layers not yet reached).
    Peak,
}

/// What a plan decides for one checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerPlan {
    /// The checkpoint's name.
    pub name: String,
    /// Its `Auto` regions, in the order of `choice.save`.
    pub regions: Vec<String>,
    /// What it does.
    pub choice: Choice,
    /// The shapes of its inputs when the profile measured it; a call with
    /// other shapes under this plan is an error naming it (the plan's
    /// figures would not hold). `None`: not checked.
    pub inputs: Option<Vec<Vec<i64>>>,
}

impl LayerPlan {
    /// The policy the plan gives region `name`.
    ///
    /// ```
    /// use remat_runtime::planner::{Choice, LayerPlan};
    /// use remat_runtime::Policy;
    /// let l = LayerPlan {
    ///     name: "layers.0".into(),
    ///     regions: vec!["attention".into()],
    ///     choice: Choice { checkpointed: true, save: vec![true], offload: vec![false] },
    ///     inputs: None,
    /// };
    /// assert_eq!(l.policy("attention"), Some(Policy::Save));
    /// ```
    pub fn policy(&self, name: &str) -> Option<Policy> {
        let i = self.regions.iter().position(|r| r == name)?;
        Some(self.choice.policy(i))
    }
}

/// Per planned checkpoint, whether it checkpoints and which `Auto` regions
/// save; activate it around the forward with [`Plan::activate`].
///
/// ```
/// use remat_runtime::{checkpoint, planner, recompute_needs_tensor, region, Policy};
/// use remat_runtime::planner::Plan;
/// let w = tch::Tensor::ones([8, 8], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let forward = || {
///     let w = w.shallow_clone();
///     checkpoint("layers.0").auto().call(&w, |w| {
///         let h = region("exp", Policy::Auto).call(&w, |w| (w * 2).exp());
///         recompute_needs_tensor(&h);
///         h.sin().sum(tch::Kind::Float)
///     })
/// };
/// let profile = planner::profile(forward).unwrap();
/// let plan = Plan::for_budget(&profile, 1 << 20).unwrap(); // plenty: nothing replays
/// assert_eq!(plan.predicted.replay_ns, 0);
/// let (loss, kept) = plan.scope(|| planner::measure_kept_bytes(forward));
/// assert_eq!(kept, plan.predicted.kept_bytes);
/// loss.backward();
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// What `budget` bounds.
    pub target: Target,
    /// The budget it was made for (`None` for a plan given by its choices).
    pub budget: Option<i64>,
    /// One entry per planned checkpoint, in forward order.
    pub layers: Vec<LayerPlan>,
    /// What it costs, by the profile.
    pub predicted: Prediction,
}

/// Keeps a plan active on this thread; see [`Plan::activate`].
pub struct PlanGuard {
    _active: ActiveGuard,
}

impl Plan {
    /// A plan whose predicted bytes kept at the forward→backward point are
    /// at most `bytes`, as fast as the profile can tell: among the plans
    /// that fit, those whose interval `replay ± spread` overlaps the
    /// fastest one's are equivalent, and of those it takes the one with
    /// (in this order) the fewest checkpointed blocks, the fewest bytes
    /// rebuilt by replays (the sum of the choices' working sets), the
    /// least predicted replay time, the fewest bytes kept; if the pick at a
    /// smaller budget is predicted faster, the fastest such pick instead,
    /// so that a larger budget never gets a plan predicted slower. Within a
    /// kind of checkpoint, the blocks that keep least come first
    /// (docs/planner.md, "Equivalent plans"). Fails, stating the minimum,
    /// when no plan fits.
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// let plan = remat_runtime::planner::Plan::for_budget(profile, 60 << 20).unwrap();
    /// println!("{plan}");
    /// # }
    /// ```
    pub fn for_budget(profile: &Profile, bytes: i64) -> Result<Plan> {
        match solve::for_bound(profile, solve::Bound::Kept(bytes)) {
            Some(choices) => Ok(Plan::build(profile, Target::Kept, Some(bytes), &choices)),
            None => {
                let least = Plan::minimum(profile);
                Err(Error::Plan(format!(
                    "the budget {} ({bytes} bytes) is below the minimum possible {} ({} bytes) \
                     kept at the forward→backward point, {}; raise the budget",
                    human_bytes(bytes),
                    human_bytes(least.predicted.kept_bytes),
                    least.predicted.kept_bytes,
                    least.describe_minimum(),
                )))
            }
        }
    }

    /// Like [`Plan::for_budget`], with the budget bounding the predicted
    /// peak during backward ([`Prediction::peak_bytes`]) at every point of
    /// the backward instead of the kept bytes. The peak measured during the
    /// plan's backward is within [`peak_tolerance`](crate::planner::peak_tolerance)
    /// of the prediction (docs/planner.md, "The peak contract").
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// let plan = remat_runtime::planner::Plan::for_peak_budget(profile, 80 << 20).unwrap();
    /// assert!(plan.predicted.peak_bytes <= 80 << 20);
    /// # }
    /// ```
    pub fn for_peak_budget(profile: &Profile, bytes: i64) -> Result<Plan> {
        let choices = solve::for_bound(profile, solve::Bound::Peak(bytes));
        let best = choices.map(|c| Plan::build(profile, Target::Peak, Some(bytes), &c));
        best.ok_or_else(|| {
            let least = solve::least_peak(profile);
            Error::Plan(format!(
                "the budget {} ({bytes} bytes) is below the minimum possible predicted peak {} \
                 ({least} bytes) during backward; raise the budget",
                human_bytes(bytes),
                human_bytes(least),
            ))
        })
    }

    /// The plan that keeps least (ties: the least replay time).
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// let least = remat_runtime::planner::Plan::minimum(profile);
    /// assert!(remat_runtime::planner::Plan::for_budget(profile, least.predicted.kept_bytes - 1).is_err());
    /// # }
    /// ```
    pub fn minimum(profile: &Profile) -> Plan {
        let choices: Vec<usize> = profile
            .layer_kind
            .iter()
            .map(|&k| {
                let kind = &profile.kinds[k];
                (0..kind.choices.len())
                    .min_by_key(|&c| (kind.choices[c].bytes, kind.choices[c].replay_ns))
                    .unwrap_or(0)
            })
            .collect();
        Plan::build(profile, Target::Kept, None, &choices)
    }

    /// The plan whose predicted peak during backward is least: the plan
    /// [`Plan::for_peak_budget`] gives at the least budget it accepts.
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// use remat_runtime::planner::Plan;
    /// let least = Plan::minimum_peak(profile).predicted.peak_bytes;
    /// assert!(Plan::for_peak_budget(profile, least - 1).is_err());
    /// # }
    /// ```
    pub fn minimum_peak(profile: &Profile) -> Plan {
        let least = solve::least_peak(profile);
        let choices = solve::for_bound(profile, solve::Bound::Peak(least))
            .expect("a plan fits the least peak budget");
        Plan::build(profile, Target::Peak, Some(least), &choices)
    }

    /// The plan of one choice index per layer (indices into its kind's
    /// `choices`), with its prediction.
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// use remat_runtime::planner::Plan;
    /// let baseline = Plan::from_choices(profile, &vec![1; profile.layers.len()]).unwrap();
    /// # }
    /// ```
    pub fn from_choices(profile: &Profile, choices: &[usize]) -> Result<Plan> {
        if choices.len() != profile.layers.len() {
            return Err(Error::Plan(format!(
                "{} choice(s) given for {} planned checkpoint(s)",
                choices.len(),
                profile.layers.len()
            )));
        }
        for (i, &c) in choices.iter().enumerate() {
            let n = profile.kinds[profile.layer_kind[i]].choices.len();
            if c >= n {
                return Err(Error::Plan(format!(
                    "choice {c} for checkpoint `{}`, which has {n}",
                    profile.layers[i]
                )));
            }
        }
        Ok(Plan::build(profile, Target::Kept, None, choices))
    }

    fn build(profile: &Profile, target: Target, budget: Option<i64>, choices: &[usize]) -> Plan {
        let layers = choices
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let kind = &profile.kinds[profile.layer_kind[i]];
                LayerPlan {
                    name: profile.layers[i].clone(),
                    regions: kind.regions.clone(),
                    choice: kind.choices[c].choice.clone(),
                    inputs: Some(kind.input_sizes.clone()),
                }
            })
            .collect();
        Plan {
            target,
            budget,
            layers,
            predicted: predict(profile, choices),
        }
    }

    /// The choice index per layer under `profile` (indices into each
    /// kind's `choices`, what [`predict`] and
    /// [`predict_levels`](crate::planner::predict_levels) take); the plan
    /// must match the profile (see [`Plan::check`]).
    ///
    /// ```no_run
    /// # fn f(profile: &remat_runtime::planner::Profile) {
    /// use remat_runtime::planner::{predict, Plan};
    /// let plan = Plan::for_budget(profile, 60 << 20).unwrap();
    /// assert_eq!(predict(profile, &plan.choice_indices(profile)), plan.predicted);
    /// # }
    /// ```
    pub fn choice_indices(&self, profile: &Profile) -> Vec<usize> {
        self.layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let kind = &profile.kinds[profile.layer_kind[i]];
                let policies: Vec<Option<Policy>> =
                    kind.regions.iter().map(|r| l.policy(r)).collect();
                let want = if l.choice.checkpointed {
                    Choice {
                        checkpointed: true,
                        save: policies
                            .iter()
                            .map(|p| p.is_some_and(Policy::keeps))
                            .collect(),
                        offload: policies
                            .iter()
                            .map(|p| matches!(p, Some(Policy::Offload(_))))
                            .collect(),
                    }
                } else {
                    Choice::whole(kind.regions.len())
                };
                kind.choices
                    .iter()
                    .position(|c| c.choice == want)
                    .unwrap_or(0)
            })
            .collect()
    }

    fn describe_minimum(&self) -> String {
        let baseline = self
            .layers
            .iter()
            .all(|l| l.choice.checkpointed && l.choice.save.iter().all(|s| !s));
        if baseline {
            "with every planned block checkpointed and every `auto` region recomputed".into()
        } else {
            format!("with {}", self.summary())
        }
    }

    /// One line per distinct decision: `layers.0-1: checkpoint [save, recompute]`.
    fn summary(&self) -> String {
        self.layers
            .iter()
            .map(|l| format!("{}: {}", l.name, l.choice))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Makes this plan decide `Policy::Auto` regions and `auto()`
    /// checkpoints started on this thread until the guard drops (the
    /// innermost active plan wins). Each checkpoint takes its decision when
    /// its forward starts and keeps it for its replay, whichever thread
    /// runs that.
    ///
    /// ```no_run
    /// # fn f(plan: &remat_runtime::planner::Plan, forward: impl Fn() -> tch::Tensor) {
    /// let loss = {
    ///     let _plan = plan.activate();
    ///     forward()
    /// };
    /// loss.backward(); // replays as the forward decided
    /// # }
    /// ```
    pub fn activate(&self) -> PlanGuard {
        let describe = match self.budget {
            Some(b) => format!("the active plan (budget {})", human_bytes(b)),
            None => "the active plan".to_string(),
        };
        let table = decision_table(
            describe,
            self.layers.iter().map(|l| {
                (
                    l.name.as_str(),
                    l.regions.as_slice(),
                    &l.choice,
                    l.inputs.as_deref(),
                )
            }),
        );
        PlanGuard {
            _active: auto::push(Some(Arc::new(table))),
        }
    }

    /// Runs `f` with this plan active (see [`Plan::activate`]).
    ///
    /// ```no_run
    /// # fn f(plan: &remat_runtime::planner::Plan, forward: impl Fn() -> tch::Tensor) {
    /// plan.scope(|| forward()).backward();
    /// # }
    /// ```
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _active = self.activate();
        f()
    }

    /// Checks that this plan matches the model `profile` describes: the
    /// same planned checkpoints and, in each, the same `auto` regions; a
    /// checkpoint is off only if it is `auto()`. The error names what
    /// differs.
    ///
    /// ```no_run
    /// # fn f(plan: &remat_runtime::planner::Plan, profile: &remat_runtime::planner::Profile) {
    /// plan.check(profile).unwrap();
    /// # }
    /// ```
    pub fn check(&self, profile: &Profile) -> Result<()> {
        let names: Vec<&str> = self.layers.iter().map(|l| l.name.as_str()).collect();
        let model: Vec<&str> = profile.layers.iter().map(String::as_str).collect();
        if names != model {
            let extra: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| !model.contains(n))
                .collect();
            let missing: Vec<&str> = model
                .iter()
                .copied()
                .filter(|n| !names.contains(n))
                .collect();
            let mut message = format!(
                "the plan does not match the model: the plan has {} planned checkpoint(s), the \
                 model {}",
                names.len(),
                model.len()
            );
            if !extra.is_empty() {
                message += &format!("; not in the model: {}", extra.join(", "));
            }
            if !missing.is_empty() {
                message += &format!("; missing from the plan: {}", missing.join(", "));
            }
            if extra.is_empty() && missing.is_empty() {
                message += "; the same names in another order";
            }
            return Err(Error::Plan(message + "; make a new plan for this model"));
        }
        for (i, l) in self.layers.iter().enumerate() {
            let kind = &profile.kinds[profile.layer_kind[i]];
            let unknown: Vec<&str> = l
                .regions
                .iter()
                .filter(|r| !kind.regions.contains(r))
                .map(String::as_str)
                .collect();
            let missing: Vec<&str> = kind
                .regions
                .iter()
                .filter(|r| !l.regions.contains(r))
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() || !missing.is_empty() {
                return Err(Error::Plan(format!(
                    "the plan does not match the model: checkpoint `{}` has `auto` regions {} \
                     in the model; the plan names {}{}{}",
                    l.name,
                    list(&kind.regions),
                    list(&l.regions),
                    if unknown.is_empty() {
                        String::new()
                    } else {
                        format!(" (unknown: {})", unknown.join(", "))
                    },
                    if missing.is_empty() {
                        String::new()
                    } else {
                        format!(" (missing: {})", missing.join(", "))
                    },
                )));
            }
            if !l.choice.checkpointed && !kind.can_disable {
                return Err(Error::Plan(format!(
                    "the plan does not match the model: it turns checkpoint `{}` off, but the \
                     model's checkpoint is not `auto()` and always checkpoints",
                    l.name
                )));
            }
        }
        Ok(())
    }

    /// This plan checked against `profile`, with its regions in the
    /// profile's order and its prediction recomputed from the profile.
    ///
    /// ```no_run
    /// # fn f(plan: remat_runtime::planner::Plan, profile: &remat_runtime::planner::Profile) {
    /// let plan = plan.rebased(profile).unwrap();
    /// # }
    /// ```
    pub fn rebased(self, profile: &Profile) -> Result<Plan> {
        self.check(profile)?;
        let choices = self.choice_indices(profile);
        let mut plan = Plan::build(profile, self.target, self.budget, &choices);
        plan.budget = self.budget;
        Ok(plan)
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match self.target {
            Target::Kept => "kept",
            Target::Peak => "peak",
        };
        match self.budget {
            Some(b) => write!(f, "plan for {} {target}", human_bytes(b))?,
            None => write!(f, "plan")?,
        }
        writeln!(
            f,
            " (predicted: {} kept, peak {}, replay {:.3} ± {:.3} ms)",
            human_bytes(self.predicted.kept_bytes),
            human_bytes(self.predicted.peak_bytes),
            self.predicted.replay_ns as f64 / 1e6,
            self.predicted.spread_ns as f64 / 1e6
        )?;
        for l in &self.layers {
            if !l.choice.checkpointed {
                writeln!(f, "  {:<12} whole (not checkpointed)", l.name)?;
                continue;
            }
            let regions: Vec<String> = l
                .regions
                .iter()
                .enumerate()
                .map(|(i, r)| format!("{r}: {}", l.choice.policy(i).word()))
                .collect();
            writeln!(f, "  {:<12} checkpoint  {}", l.name, regions.join(", "))?;
        }
        Ok(())
    }
}
