//! Regions: calls inside a checkpoint marked `Save` or `Recompute`, and
//! `recompute_needs_tensor` for bare code.
//!
//! This file keeps the rules of docs/semantics.md's "R. Regions" that do
//! not depend on the policy: plain calls outside checkpoints (R1), names
//! (non-empty, unique per phase: R2), `Auto` resolved from the forward's
//! decision (R3), nesting (R4), the same path on recomputation (R5), and
//! dispatch by phase and policy; `save_region` holds what `Save` does (S, P).
//! `recompute_needs_tensor` is rule K4; asking every checkpoint whose
//! forward runs on the thread to keep a value bare code reads is K4 and K8
//! (`ask`), which `needs` and a checkpoint's returned values use too.

use crate::checkpointing::checkpoint_state::CheckpointState;
use crate::checkpointing::determinism::Determinism;
use crate::checkpointing::frame::{self, Frame, Phase};
use crate::checkpointing::path::{Asker, At, Step};
use crate::checkpointing::save_region::keep::ask_producers;
use crate::checkpointing::save_region::{
    forward as save_forward, rerun as save_rerun, serve as save_serve,
};
use crate::error::{Error, Result};
use crate::io::{RegionInput, RegionOutput};
use crate::policy::Policy;
use crate::recorders::timing::{since_start, CheckpointCall, DeviceTimer, RegionCall};
use crate::recorders::trace;
use crate::saved::arg::{token, RegionArg};
use crate::sync::lock;
use std::borrow::Cow;
use std::panic::Location;
use std::sync::Arc;

/// A region about to be called; see [`region`].
///
/// ```
/// use remat_runtime::{region, Policy, Region};
/// let double: Region = region("double", Policy::Save);
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let y = double.call(&x, |x| x * 2); // outside a checkpoint: a plain call
/// assert!(y.equal(&(&x * 2)));
/// ```
#[must_use = "a region does nothing until `call`ed"]
pub struct Region {
    name: Cow<'static, str>,
    policy: Policy,
    location: &'static Location<'static>,
}

/// A region named `name` with `policy`. Outside a checkpoint it is a plain
/// call. The call site is recorded for diagnostics.
///
/// ```
/// use remat_runtime::{region, Policy};
/// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
/// let y = region("double", Policy::Save).call(&x, |x| x * 2);
/// ```
#[track_caller]
pub fn region(name: impl Into<Cow<'static, str>>, policy: Policy) -> Region {
    Region {
        name: name.into(),
        policy,
        location: Location::caller(),
    }
}

enum Mode {
    Plain,
    /// With the policy resolved (never `Auto`).
    Run(Arc<CheckpointState>, Phase, Policy),
}

impl Region {
    /// Where the region was created.
    ///
    /// ```
    /// use remat_runtime::{region, Policy};
    /// let r = region("double", Policy::Save);
    /// assert_eq!(r.location().line(), line!() - 1);
    /// ```
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// Runs `body` on `inputs` under the region's policy.
    ///
    /// Panics where [`Region::try_call`] returns an error (inside a replay,
    /// the panic becomes the `Err` of the backward that replays).
    ///
    /// `inputs` is one [`RegionInput`] or a tuple of
    /// them; `body` receives them as given. A save output
    /// ([`Saved`](crate::Saved)) may be an input too, alone or in a tuple of
    /// [`Arg`](crate::Arg)s: `body` receives it readable, since the region
    /// asks for it (docs/semantics.md, rule K2) or is skipped on
    /// recomputation (rule K3); see [`RegionArg`].
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, Policy};
    /// use tch::{Kind, Tensor};
    ///
    /// let x = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
    /// let w = Tensor::from_slice(&[3.0f32, 4.0]);
    /// let y = checkpoint("block").call((&x, &w), |(x, w)| {
    ///     let h = region("scale", Policy::Save).call((&x, &w, 0.5), |(x, w, s)| x * w * s);
    ///     region("square", Policy::Recompute).call(&h, |h| h * h)
    /// });
    /// y.sum(Kind::Float).backward();
    /// // d/dx (x w / 2)^2 = x w^2 / 2
    /// assert_eq!(Vec::<f32>::try_from(x.grad()).unwrap(), [4.5, 16.0]);
    /// ```
    pub fn call<I: RegionArg, O: RegionOutput>(
        self,
        inputs: I,
        body: impl FnOnce(I::Opened) -> O,
    ) -> O {
        match self.try_call(inputs, body) {
            Ok(out) => out,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`Region::call`], returning errors as `Err`.
    ///
    /// ```
    /// use remat_runtime::{region, Policy};
    /// let err = region("", Policy::Save).try_call((), |()| tch::Tensor::ones([1], tch::kind::FLOAT_CPU));
    /// assert!(err.is_err());
    /// ```
    pub fn try_call<I: RegionArg, O: RegionOutput>(
        self,
        inputs: I,
        body: impl FnOnce(I::Opened) -> O,
    ) -> Result<O> {
        // docs/dsl.md, rule Y3: a save output among the inputs reaches the
        // body readable; the region asks for it (K2) or is skipped (K3).
        let inputs = inputs.open(token());
        // docs/semantics.md, rule R2: a name is never empty, inside a checkpoint
        // or not (checked before anything else).
        if self.name.is_empty() {
            return Err(Error::Region {
                region: "<empty>".into(),
                message: format!(
                    "region names must be non-empty (region created at {})",
                    self.location
                ),
            });
        }
        let mut name = self.name.clone();
        let mode = frame::with_top(|f| match f {
            // docs/semantics.md, rule R1: outside any checkpoint a region is a plain call.
            None => Ok(Mode::Plain),
            Some(f) => self.enter(f, &mut name),
        })?;
        let (state, phase, policy) = match mode {
            Mode::Plain => return Ok(body(inputs)),
            Mode::Run(state, phase, policy) => (state, phase, policy),
        };
        let this = Region { name, ..self };
        this.step(&state, phase, policy, &inputs)?;
        if phase == Phase::Forward {
            if let Some(call) = &state.settings().profile {
                let timed = timed(call.clone(), this.name.to_string(), this.policy, body);
                return this.run(state, phase, policy, inputs, timed);
            }
        }
        this.run(state, phase, policy, inputs, body)
    }

    /// Places the region in the innermost frame `f`: whether it runs plain
    /// or as a region, with its full `name` and resolved policy.
    fn enter(&self, f: &mut Frame, name: &mut Cow<'static, str>) -> Result<Mode> {
        // docs/semantics.md, rule R4: in a running Save body, Save and Auto regions
        // are plain calls (no name claimed, nothing traced); Recompute is refused.
        if f.save_depth > 0 {
            // Inside a Save body the outer region keeps everything.
            return match self.policy {
                Policy::Save | Policy::Auto | Policy::Offload(_) => Ok(Mode::Plain),
                Policy::Recompute => Err(Error::Region {
                    region: f.state.region_display(&self.name),
                    message: "a `recompute` region inside a `save` region never replays, \
                              since the outer body is skipped on replay; make the inner \
                              region `save`, or the outer one `recompute`"
                        .into(),
                }),
            };
        }
        // docs/semantics.md, rule R10: the open name scopes prefix the name.
        if !f.scope.is_empty() {
            *name = Cow::Owned(format!("{}{}", f.scope, name));
        }
        // The checkpoint's decision, taken on its forward: replay agrees.
        // docs/semantics.md, rule R3: `Auto` takes the decision resolved when the
        // checkpoint's forward started.
        let policy = match self.policy {
            Policy::Auto => f
                .state
                .settings()
                .auto
                .region(f.state.display_name(), name)
                .map_err(|message| Error::Region {
                    region: f.state.region_display(name),
                    message,
                })?,
            p => p,
        };
        if f.phase == Phase::Forward {
            // docs/semantics.md, rule D1: only the forward is traced.
            trace::record_region(name, policy);
        }
        // A literal name is borrowed: no allocation on this path.
        // docs/semantics.md, rule R2: unique per phase of one checkpoint call.
        if !f.claimed.insert(name.clone()) {
            return Err(Error::Region {
                region: f.state.region_display(name),
                message: format!(
                    "the name is used twice in one {} of checkpoint `{}`; names must be \
                     unique within a checkpoint: give each call its own name (e.g. with \
                     an index)",
                    f.phase.describe(),
                    f.state.display_name()
                ),
            });
        }
        Ok(Mode::Run(f.state.clone(), f.phase, policy))
    }

    /// docs/semantics.md, rule R11: the forward notes the region, and
    /// recomputation must enter the forward's next one.
    fn step<I: RegionInput>(
        &self,
        state: &CheckpointState,
        phase: Phase,
        policy: Policy,
        inputs: &I,
    ) -> Result<()> {
        if state.settings().determinism == Determinism::None {
            return Ok(());
        }
        let mut tensors = 0;
        inputs.visit(&mut |_| tensors += 1);
        let step = Step::Region {
            name: self.name.clone(),
            policy,
            tensors,
            at: self.location,
        };
        match phase {
            Phase::Forward => {
                lock(state.path()).record(step);
                Ok(())
            }
            Phase::Recompute => lock(state.path())
                .follow(state.name(), step)
                .map_err(|m| state.error(m)),
        }
    }

    /// Like [`Region::call`], with the output as bare code should hold the
    /// output of a region that may be skipped on recomputation: each tensor
    /// wrapped in [`Saved`](crate::Saved), readable after
    /// [`needs`](crate::needs) (docs/dsl.md, rule Y1). What `remat!` does
    /// for `save`, `auto` and `region [..]` regions.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, needs, region, Policy, Saved};
    /// use tch::{kind::FLOAT_CPU, Kind, Tensor};
    ///
    /// let x = Tensor::ones([2], FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("block").call(&x, |x| {
    ///     let (a, b): (Saved<Tensor>, Saved<Tensor>) =
    ///         region("pair", Policy::Save).call_saved(&x, |x| (x * 2, x * 3));
    ///     let b = needs(b);
    ///     region("mul", Policy::Recompute).call(&a, |a| a * 1) + b
    /// });
    /// y.sum(Kind::Float).backward();
    /// ```
    #[track_caller]
    pub fn call_saved<I: RegionArg, O: RegionOutput>(
        self,
        inputs: I,
        body: impl FnOnce(I::Opened) -> O,
    ) -> O::Saved {
        self.call(inputs, body).into_saved()
    }

    /// Like [`Region::call_saved`], returning errors as `Err`.
    ///
    /// ```
    /// use remat_runtime::{region, Policy};
    /// let err = region("", Policy::Save).try_call_saved((), |()| tch::Tensor::ones([1], tch::kind::FLOAT_CPU));
    /// assert!(err.is_err());
    /// ```
    pub fn try_call_saved<I: RegionArg, O: RegionOutput>(
        self,
        inputs: I,
        body: impl FnOnce(I::Opened) -> O,
    ) -> Result<O::Saved> {
        self.try_call(inputs, body).map(RegionOutput::into_saved)
    }

    /// The region's arguments ask for the save outputs among them.
    fn ask_for_arguments<I: RegionInput>(&self, inputs: &I) -> Result<()> {
        ask(
            inputs,
            false,
            &Asker::Argument(self.name.clone()),
            self.location,
        )
    }

    fn run<I: RegionInput, O: RegionOutput>(
        &self,
        state: Arc<CheckpointState>,
        phase: Phase,
        policy: Policy,
        inputs: I,
        body: impl FnOnce(I) -> O,
    ) -> Result<O> {
        let _running = frame::enter_region(self.name.clone());
        match (phase, policy) {
            (Phase::Forward, Policy::Recompute) => {
                // docs/semantics.md, rules K2 and K8: a Recompute region asks for the
                // Save outputs (and views of them) it receives, of its own checkpoint
                // (the innermost) and of those around it whose forward is running.
                self.ask_for_arguments(&inputs)?;
                let parts = crate::parts::into_parts(body(inputs));
                // docs/semantics.md, rule R6: no fresh leaves as outputs.
                save_forward::reject_grad_leaves(|| state.region_display(&self.name), &parts)?;
                crate::parts::from_parts(parts)
            }
            // docs/semantics.md, rule O1: an Offload region is a Save region
            // whose keeps move to `target`.
            (Phase::Forward, Policy::Save | Policy::Offload(_)) => {
                let target = match policy {
                    Policy::Offload(target) => Some(target),
                    _ => None,
                };
                save_forward::forward(
                    &state,
                    self.name.clone(),
                    self.location,
                    target,
                    inputs,
                    body,
                )
            }
            (Phase::Recompute, Policy::Recompute) => {
                // docs/semantics.md, rule R5: a name the forward ran as Save must not
                // recompute now.
                if state.records().contains(&self.name) {
                    return Err(Error::Region {
                        region: state.region_display(&self.name),
                        message: "the forward ran it as `save` but replay runs it as \
                                  `recompute`; its policy must not change between forward and \
                                  replay"
                            .into(),
                    });
                }
                // docs/semantics.md, rule R11: its arguments ask as on the
                // forward, checked against the forward's asks.
                self.ask_for_arguments(&inputs)?;
                Ok(body(inputs))
            }
            // docs/semantics.md, rule C16: run again for a closure that
            // computes gradients itself, whose backward on the recomputation's
            // graph must reach through the region.
            (Phase::Recompute, Policy::Save | Policy::Offload(_))
                if state.settings().backward_inside =>
            {
                save_rerun::rerun(&state, &self.name, inputs, body)
            }
            // docs/semantics.md, rule P1: skipped during recomputation, outputs served.
            (Phase::Recompute, Policy::Save | Policy::Offload(_)) => {
                save_serve::serve(&state, &self.name, inputs)
            }
            (_, Policy::Auto) => Err(Error::Internal(format!(
                "region `{}` reached its run with its policy unresolved",
                state.region_display(&self.name)
            ))),
        }
    }
}

/// Declares that bare code is about to read `t`: every tensor in it that is
/// (a view of) a `Save` region's output in the running checkpoint's forward
/// is kept, so that replay can serve it. Anywhere else it does nothing.
///
/// `t` is anything a region takes as input ([`RegionInput`]): a tensor, a
/// reference, an `Option`, a slice or `Vec` of tensors (every element is
/// asked for: the way to read a `Vec`-valued output in a loop), or a tuple.
///
/// ```
/// use tch::{kind::FLOAT_CPU, Tensor};
/// let t = Tensor::ones([2], FLOAT_CPU);
/// remat_runtime::recompute_needs_tensor(&t); // no checkpoint: nothing happens
/// let parts = vec![t.shallow_clone(), t.shallow_clone()];
/// remat_runtime::recompute_needs_tensor(&parts); // each element
/// ```
#[track_caller]
pub fn recompute_needs_tensor<T: RegionInput + ?Sized>(t: &T) {
    // docs/semantics.md, rule K4: only in a checkpoint's forward; elsewhere a no-op.
    asked(t, false, &Asker::RecomputeNeedsTensor, Location::caller());
}

/// Asks every checkpoint whose forward runs on this thread (all but the
/// innermost with `skip_innermost`) to keep the `Save` outputs in `value`;
/// during recomputation, checks the ask against the forward's.
///
/// docs/semantics.md, rules K4 and K8: a value read by bare code of a nested
/// checkpoint is read again when the outer checkpoint replays, so the outer
/// one must keep it too; a checkpoint whose forward has ended, or that is
/// replaying, has nothing to keep. Rule R11: a checkpoint that is
/// recomputing checks that its forward made the same ask here.
pub(crate) fn ask<T: RegionInput + ?Sized>(
    value: &T,
    skip_innermost: bool,
    by: &Asker,
    at: At,
) -> Result<()> {
    let (first, more) = frame::forward_states(skip_innermost);
    for state in first.iter().chain(&more) {
        ask_producers(state.output_index(), state.path(), &value, by, at)?;
    }
    let (first, more) = frame::recomputing_states(skip_innermost);
    for state in first.iter().chain(&more) {
        let mut path = lock(state.path());
        if !path.serves_any() {
            continue;
        }
        let mut diverged = Ok(());
        value.visit(&mut |t| {
            if diverged.is_ok() {
                diverged = path.ask(state.name(), t, by, at);
            }
        });
        diverged.map_err(|m| state.error(m))?;
    }
    Ok(())
}

/// [`ask`], panicking as `recompute_needs_tensor` does on a failure to keep
/// (a pack hook's error, which names the region and output) or a
/// recomputation that left its forward's path.
pub(crate) fn asked<T: RegionInput + ?Sized>(value: &T, skip_innermost: bool, by: &Asker, at: At) {
    if let Err(e) = ask(value, skip_innermost, by, at) {
        panic!("{e}");
    }
}

/// `body`, timed for the planner's profile of `call` (forward only).
fn timed<I, O>(
    call: Arc<std::sync::Mutex<CheckpointCall>>,
    name: String,
    declared: Policy,
    body: impl FnOnce(I) -> O,
) -> impl FnOnce(I) -> O {
    move |inputs| {
        let offset = since_start(&call);
        let start = DeviceTimer::start();
        let out = body(inputs);
        lock(&call).regions.push(RegionCall {
            name,
            declared,
            start: offset,
            elapsed: start.elapsed(),
        });
        out
    }
}
