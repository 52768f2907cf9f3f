//! `checkpoint()`: the public builder of a checkpoint call, and the
//! defaults that resolve its options (the process-wide switches, the
//! environment, the active plan) before `checkpoint_forward` runs it.
//!
//! Invariant: every option left unsaid is resolved here, once per call, so
//! the forward and every replay see one value.
//!
//! docs/semantics.md rules kept here: C4 (disabled or switched off: a plain
//! run), C14 and C20 (whether the generators are kept), C18 (whether replay
//! may stop early), P5 (strict by default from the environment), R3 (the
//! plan's decision, taken once), T4 (which saved-tensor pair).

use crate::bridge::grad_enabled;
use crate::checkpointing::auto;
use crate::checkpointing::checkpoint_forward::{self, Call};
use crate::checkpointing::closure::RecomputableClosure;
use crate::checkpointing::determinism::Determinism;
use crate::checkpointing::early_stop;
use crate::checkpointing::path::{At, Run};
use crate::checkpointing::random_state;
use crate::checkpointing::tensor_hooks::TensorHooks;
use crate::error::{catch_quietly, panic_message, Error, Result};
use crate::hooks::state_hooks::RecomputeStateHook;
use crate::io::CheckpointInputs;
use crate::saved::returned::CheckpointOutput;
use std::panic::Location;
use std::sync::Arc;

/// Options of one checkpoint; run it with [`Checkpoint::call`].
///
/// ```
/// use remat_runtime::{checkpoint, recompute_needs_tensor, region, Policy};
/// use tch::{Kind, Tensor};
///
/// let w = Tensor::randn([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let x = Tensor::randn([2, 4], tch::kind::FLOAT_CPU);
/// let w2 = w.shallow_clone();
/// let y = checkpoint("block").call(&x, move |x| {
///     let h = region("proj", Policy::Save).call(&x, |x| x.matmul(&w2));
///     recompute_needs_tensor(&h); // bare code below reads it on replay
///     h.relu()
/// });
/// y.sum(Kind::Float).backward(); // replays `relu`, not `proj`
/// ```
#[must_use = "a checkpoint does nothing until `call`ed"]
pub struct Checkpoint {
    name: Option<String>,
    determinism: Determinism,
    state_hooks: Vec<Arc<dyn RecomputeStateHook>>,
    saved_tensors_hooks: Option<TensorHooks>,
    enabled: Enabled,
    /// `None`: the process-wide default (`REMAT_STRICT_RECOMPUTE`).
    strict: Option<bool>,
    /// `None`: the process-wide default (`Checkpoint::set_default_early_stop`,
    /// `REMAT_EARLY_STOP`).
    early_stop: Option<bool>,
    /// `None`: the process-wide default
    /// (`Checkpoint::set_default_preserve_rng_state`, `REMAT_PRESERVE_RNG_STATE`).
    preserve_rng_state: Option<bool>,
    backward_inside: bool,
}

/// Whether a checkpoint call checkpoints.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Enabled {
    On,
    Off,
    /// As the active plan decides (on without one).
    Auto,
}

/// Whether strict recomputation is on for checkpoints that do not say: the
/// environment variable `REMAT_STRICT_RECOMPUTE` (`1`, `true`, `on`, `yes`), read once.
// docs/semantics.md, rule P5: the environment variable, read once; an
// explicit `strict_recompute` wins (see `run`).
fn strict_by_default() -> bool {
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STRICT.get_or_init(|| {
        std::env::var("REMAT_STRICT_RECOMPUTE").is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "on" | "yes"
            )
        })
    })
}

/// A checkpoint named `name` (shown in errors and reports as the prefix of
/// its regions' names: `name::region`). Use `""` for an unnamed one.
///
/// ```
/// let ckpt = remat_runtime::checkpoint("layers.0");
/// ```
pub fn checkpoint(name: impl Into<String>) -> Checkpoint {
    let name = name.into();
    Checkpoint {
        name: (!name.is_empty()).then_some(name),
        determinism: Determinism::default(),
        state_hooks: Vec::new(),
        saved_tensors_hooks: None,
        enabled: Enabled::On,
        strict: None,
        early_stop: None,
        preserve_rng_state: None,
        backward_inside: false,
    }
}

impl Checkpoint {
    /// Whether this call checkpoints at all (default: yes). Disabled, `call`
    /// runs the closure once, plainly: regions inside are plain calls,
    /// nothing is recorded or replayed. One model body can so run with and
    /// without checkpointing, chosen at run time.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, diagnostics::live_checkpoints};
    /// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let checkpointing = false; // e.g. from a command-line flag
    /// let y = checkpoint("block").enabled(checkpointing).call(&x, |x| x.sin());
    /// assert_eq!(live_checkpoints(), 0); // a plain call: no checkpoint state
    /// y.sum(tch::Kind::Float).backward();
    /// ```
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = if enabled { Enabled::On } else { Enabled::Off };
        self
    }

    /// Whether this call checkpoints is the active plan's decision for this
    /// checkpoint's name (see `Plan::activate`); without an active plan it
    /// checkpoints. A plan that does not know the name makes `call` fail
    /// with an error naming it. Its `Policy::Auto` regions follow the same
    /// plan; the decision is taken once, on the forward, and replay keeps it.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, diagnostics::live_checkpoints, region, Policy};
    /// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("block").auto().call(&x, |x| {
    ///     region("sin", Policy::Auto).call(&x, |x| x.sin())
    /// });
    /// assert_eq!(live_checkpoints(), 1); // no plan: it checkpoints
    /// y.sum(tch::Kind::Float).backward();
    /// ```
    pub fn auto(mut self) -> Self {
        self.enabled = Enabled::Auto;
        self
    }

    /// Strict recomputation: on replay, every `Save` output that no consumer asked
    /// for (no `recompute` region received it, no `recompute_needs_tensor`)
    /// is a placeholder, even when autograd keeps the tensor anyway (an op
    /// that saves its own output). A read that the compile-time check could
    /// not see then fails every time, not only when autograd happened not to
    /// keep the value. Meant for test suites; without this call the
    /// environment variable `REMAT_STRICT_RECOMPUTE=1` turns it on for the
    /// whole process.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, Policy};
    /// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("block").strict_recompute(true).call(&x, |x| {
    ///     // `exp` saves its own output, so autograd keeps `h` anyway...
    ///     let h = region("exp", Policy::Save).call(&x, |x| x.exp());
    ///     h.sin() // ...but this bare read did not ask for it
    /// });
    /// let err = y.sum(tch::Kind::Float).f_backward().unwrap_err();
    /// assert!(err.to_string().contains("`block::exp.out` is a placeholder"));
    /// ```
    pub fn strict_recompute(mut self, strict: bool) -> Self {
        self.strict = Some(strict);
        self
    }

    /// Whether recomputation stops computing as soon as it has rebuilt
    /// every saved tensor the backward can still read (default: yes, unless
    /// `Checkpoint::set_default_early_stop(false)` or `REMAT_EARLY_STOP=0`
    /// said otherwise; rules C17 to C19).
    ///
    /// Stopped, recomputation does not repeat the work after the closure's
    /// last save: the op making that save, and every later op that has a
    /// tensor computed from it among its inputs, compute nothing and return
    /// placeholders with the shapes they would have. The closure itself runs
    /// on to its end and returns normally (its result is discarded anyway):
    /// nothing unwinds through it, its locks are released as usual, and a
    /// `panic = "abort"` build stops too. What it cannot do in that tail is
    /// read the values of such a tensor: that read fails, so a closure that
    /// reads values after its last save turns early stop off. Strict
    /// recomputation (`strict_recompute`) always runs the whole closure.
    ///
    /// ```
    /// use remat_runtime::checkpoint;
    /// use std::sync::Arc;
    ///
    /// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let run = |early_stop: bool| {
    ///     let tail = Arc::new(std::sync::Mutex::new(None));
    ///     let seen = tail.clone();
    ///     let y = checkpoint("block").early_stop(early_stop).call(&x, move |x| {
    ///         let y = x.sin() * 2; // the last save: `sin` saves its input
    ///         // The tail: on recomputation with early stop, `y` has no values.
    ///         *seen.lock().unwrap() = Some(y.sum(tch::Kind::Float).f_double_value(&[]).is_ok());
    ///         y
    ///     });
    ///     y.sum(tch::Kind::Float).backward();
    ///     let seen = tail.lock().unwrap().take();
    ///     seen
    /// };
    /// assert_eq!(run(true), Some(false)); // the replay computed nothing after `sin`
    /// assert_eq!(run(false), Some(true)); // the replay ran the whole closure
    /// ```
    pub fn early_stop(mut self, on: bool) -> Self {
        self.early_stop = Some(on);
        self
    }

    /// Turns early stop on or off for every checkpoint started from now on
    /// that does not say otherwise with [`Checkpoint::early_stop`]
    /// (default: on, unless the environment variable `REMAT_EARLY_STOP` is
    /// `0`, `false`, `off` or `no`; rule C18). A checkpoint takes the
    /// setting when its forward starts.
    ///
    /// Early stop makes a recomputation compute nothing after the op that
    /// saves the last tensor backward needs (see [`Checkpoint::early_stop`]);
    /// it unwinds nothing. Turn it off for closures that read the values of
    /// what they compute after their last save.
    ///
    /// ```
    /// use remat_runtime::Checkpoint;
    /// Checkpoint::set_default_early_stop(false);
    /// assert!(!Checkpoint::default_early_stop());
    /// Checkpoint::set_default_early_stop(true);
    /// assert!(Checkpoint::default_early_stop());
    /// ```
    pub fn set_default_early_stop(on: bool) {
        early_stop::set_default(on);
    }

    /// Whether a checkpoint that does not say ([`Checkpoint::early_stop`])
    /// stops its recomputation early: the last
    /// [`Checkpoint::set_default_early_stop`], else the environment
    /// variable `REMAT_EARLY_STOP`, else on.
    ///
    /// ```
    /// // On unless REMAT_EARLY_STOP=0 or set_default_early_stop(false) said otherwise.
    /// let _on: bool = remat_runtime::Checkpoint::default_early_stop();
    /// ```
    pub fn default_early_stop() -> bool {
        early_stop::default_on()
    }

    /// Whether recomputation draws the random numbers the forward drew
    /// (default: yes, as torch.utils.checkpoint's `preserve_rng_state`,
    /// unless `Checkpoint::set_default_preserve_rng_state(false)` or
    /// `REMAT_PRESERVE_RNG_STATE=0` said otherwise). The checkpoint keeps
    /// libtorch's default generators (the CPU's, and each visible CUDA
    /// device's) as its forward found them and restores them when it
    /// recomputes, and again after each skipped `Save` region whose body
    /// drew; when recomputation ends the generators are put back as it
    /// found them. A forward that draws nothing keeps nothing. Without it,
    /// dropout in a checkpoint trains on gradients of masks the forward
    /// never used.
    ///
    /// ```
    /// use remat_runtime::checkpoint;
    /// use tch::{kind::FLOAT_CPU, Kind, Tensor};
    ///
    /// let x = Tensor::ones([64], FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("drop").call(&x, |x| x.dropout(0.5, true));
    /// y.sum(Kind::Float).backward();
    /// // Recomputation drew the forward's mask: the gradient is zero exactly where `y` is.
    /// assert!(x.grad().ne(0.0).equal(&y.ne(0.0)));
    ///
    /// // Opted out, recomputation draws a mask of its own.
    /// let off = checkpoint("drop").preserve_rng_state(false);
    /// ```
    pub fn preserve_rng_state(mut self, on: bool) -> Self {
        self.preserve_rng_state = Some(on);
        self
    }

    /// Whether checkpoints started from now on that do not say otherwise
    /// with [`Checkpoint::preserve_rng_state`] keep the random generators
    /// for their recomputation (default: on, unless the environment
    /// variable `REMAT_PRESERVE_RNG_STATE` is `0`, `false`, `off` or `no`;
    /// rule C14). A checkpoint takes the setting when its forward starts.
    ///
    /// ```
    /// use remat_runtime::Checkpoint;
    /// Checkpoint::set_default_preserve_rng_state(false);
    /// assert!(!Checkpoint::default_preserve_rng_state());
    /// Checkpoint::set_default_preserve_rng_state(true);
    /// assert!(Checkpoint::default_preserve_rng_state());
    /// ```
    pub fn set_default_preserve_rng_state(on: bool) {
        random_state::set_default(on);
    }

    /// Whether a checkpoint that does not say
    /// ([`Checkpoint::preserve_rng_state`]) keeps the random generators:
    /// the last [`Checkpoint::set_default_preserve_rng_state`], else the
    /// environment variable `REMAT_PRESERVE_RNG_STATE`, else on.
    ///
    /// ```
    /// // On unless REMAT_PRESERVE_RNG_STATE=0 or set_default_preserve_rng_state(false) said otherwise.
    /// let _on: bool = remat_runtime::Checkpoint::default_preserve_rng_state();
    /// ```
    pub fn default_preserve_rng_state() -> bool {
        random_state::default_on()
    }

    /// Whether the closure computes gradients itself (default: no): it calls
    /// `backward` or `Tensor::run_backward` on values it made, as a gradient
    /// penalty, a physics-informed loss or an inner step of meta-learning
    /// does, usually with `create_graph` so that the outer backward
    /// differentiates through it. Such a backward reads the checkpoint's
    /// saved tensors while the closure is still running, before anything
    /// could recompute them: with this option they stay readable until the
    /// closure returns (holders keep the forward's values that long, and
    /// `Save` regions keep the saves they would rebuild), and recomputation
    /// keeps its own graph's saves, which the closure's backward reads again
    /// on replay. The memory the checkpoint saves is unchanged once the
    /// closure has returned; while it runs, it holds what a plain closure
    /// would. Without this option such a backward fails with an error
    /// naming it.
    ///
    /// Gradients taken inside the closure run again on replay: take them
    /// with `run_backward(.., inputs, ..)` (which returns them), not with a
    /// `backward` that accumulates into parameters, or guard that with
    /// `is_recomputing()`.
    ///
    /// ```
    /// use remat_runtime::checkpoint;
    /// use tch::{Kind, Tensor};
    ///
    /// let x = Tensor::from_slice(&[0.5f32, -1.0, 2.0]).set_requires_grad(true);
    /// // A gradient penalty: d/dx of sum(x^3), squared, differentiated again.
    /// let penalty = checkpoint("penalty").backward_inside(true).call(&x, |x| {
    ///     let y = x.pow_tensor_scalar(3).sum(Kind::Float);
    ///     let g = Tensor::run_backward(&[&y], &[&x], true, true).remove(0);
    ///     g.pow_tensor_scalar(2).sum(Kind::Float) // sum(9 x^4)
    /// });
    /// penalty.backward();
    /// let expected = x.pow_tensor_scalar(3) * 36.0; // d/dx of 9 x^4
    /// assert!(x.grad().allclose(&expected, 1e-5, 1e-5, false));
    /// ```
    pub fn backward_inside(mut self, on: bool) -> Self {
        self.backward_inside = on;
        self
    }

    /// How replay is checked against the forward (default: count only).
    ///
    /// With [`Determinism::Metadata`] (the default), a recomputation that
    /// saves a tensor of another shape than the forward did is an error of
    /// the backward:
    ///
    /// ```
    /// use remat_runtime::{autograd::backward_with, checkpoint, is_recomputing, Determinism};
    /// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("block")
    ///     .determinism(Determinism::Metadata)
    ///     .call(&x, |x| {
    ///         // A bug: replay computes on a different shape.
    ///         let x = if is_recomputing() { x.repeat([2]) } else { x };
    ///         x.sin().sum(tch::Kind::Float)
    ///     });
    /// let err = backward_with(&y, false).unwrap_err();
    /// assert!(err.to_string().contains("differs between forward and replay"));
    /// ```
    pub fn determinism(mut self, determinism: Determinism) -> Self {
        self.determinism = determinism;
        self
    }

    /// Adds a hook whose state replay must see as the forward did.
    ///
    /// ```
    /// # use remat_runtime::*;
    /// # struct NoState;
    /// # impl RecomputeStateHook for NoState {
    /// #     fn snapshot(&self) -> Box<dyn std::any::Any + Send> { Box::new(()) }
    /// #     fn restore(&self, _: &(dyn std::any::Any + Send)) {}
    /// # }
    /// let ckpt = checkpoint("block").state_hook(NoState);
    /// ```
    pub fn state_hook(mut self, hook: impl RecomputeStateHook) -> Self {
        self.state_hooks.push(Arc::new(hook));
        self
    }

    /// Saved-tensor hooks for this checkpoint (instead of those pushed
    /// around it): they pack its inputs ([`SavedTensorKind::CheckpointInput`](crate::SavedTensorKind::CheckpointInput)),
    /// the saves of its `Save` regions (`Backward`) and the `Save` outputs
    /// kept for replay (`SaveOutput`).
    ///
    /// ```
    /// use remat_runtime::{checkpoint, TensorHooks};
    /// let offload = TensorHooks::new(|t: tch::Tensor| t, |t: &tch::Tensor| t.shallow_clone());
    /// let ckpt = checkpoint("block").saved_tensors_hooks(offload);
    /// ```
    pub fn saved_tensors_hooks(mut self, hooks: TensorHooks) -> Self {
        self.saved_tensors_hooks = Some(hooks);
        self
    }

    /// Adds a shared state hook: one hook value for several checkpoints.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, RecomputeStateHook, RngStateHook};
    /// use std::sync::Arc;
    /// let rng: Arc<dyn RecomputeStateHook> = Arc::new(RngStateHook::cpu());
    /// let x = tch::Tensor::ones([8], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let a = checkpoint("a").state_hook_arc(rng.clone()).call(&x, |x| x.dropout(0.5, true));
    /// let b = checkpoint("b").state_hook_arc(rng).call(&a, |a| a.dropout(0.5, true));
    /// b.sum(tch::Kind::Float).backward();
    /// // Both replays drew the forward's masks: the gradient is zero where `b` is.
    /// assert!(x.grad().ne(0.0).equal(&b.ne(0.0)));
    /// ```
    pub fn state_hook_arc(mut self, hook: Arc<dyn RecomputeStateHook>) -> Self {
        self.state_hooks.push(hook);
        self
    }

    /// Runs `body` on `inputs` as a checkpoint and returns its output.
    ///
    /// `body` receives the inputs owned (they are read back from autograd on
    /// replay) and is replayed inside backward, so it owns what else it uses.
    /// Panics where [`Checkpoint::try_call`] returns an error; errors during
    /// replay are returned by the backward that triggered it.
    ///
    /// ```
    /// use remat_runtime::checkpoint;
    /// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// use std::sync::Arc;
    /// use tch::{Kind, Tensor};
    ///
    /// let runs = Arc::new(AtomicUsize::new(0));
    /// let counter = runs.clone();
    /// let x = Tensor::from_slice(&[0.5f32, 1.0]).set_requires_grad(true);
    /// let y = checkpoint("block").call(&x, move |x| {
    ///     counter.fetch_add(1, SeqCst);
    ///     x.sin().exp()
    /// });
    /// assert_eq!(runs.load(SeqCst), 1);
    /// y.sum(Kind::Float).backward(); // replays the closure for its saved tensors
    /// assert_eq!(runs.load(SeqCst), 2);
    /// let expected = x.cos() * x.sin().exp(); // d/dx exp(sin x)
    /// assert!(x.grad().allclose(&expected, 1e-6, 1e-6, false));
    /// ```
    #[track_caller]
    pub fn call<I, O, F>(self, inputs: I, body: F) -> O::Output
    where
        I: CheckpointInputs,
        O: CheckpointOutput,
        F: Fn(I::Owned) -> O,
        F: RecomputableClosure<I::Owned, O>,
    {
        match self.run(inputs, body, Location::caller()) {
            Ok(out) => out,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`Checkpoint::call`], returning errors (and panics of the body on
    /// the forward) as `Err`.
    ///
    /// ```
    /// let x = tch::Tensor::ones([2], tch::kind::FLOAT_CPU);
    /// let r = remat_runtime::checkpoint("c").try_call(&x, |x: tch::Tensor| -> tch::Tensor { panic!("bad") });
    /// assert!(r.unwrap_err().to_string().contains("bad"));
    /// ```
    #[track_caller]
    pub fn try_call<I, O, F>(self, inputs: I, body: F) -> Result<O::Output>
    where
        I: CheckpointInputs,
        O: CheckpointOutput,
        F: Fn(I::Owned) -> O,
        F: RecomputableClosure<I::Owned, O>,
    {
        let name = self.name.clone().unwrap_or_else(|| "<unnamed>".into());
        let at = Location::caller();
        match catch_quietly(|| self.run(inputs, body, at)) {
            Ok(Ok(out)) => Ok(out),
            // Errors that already name their checkpoint or region as is.
            Ok(Err(e @ (Error::Checkpoint { .. } | Error::Region { .. }))) => Err(e),
            // libtorch's and hooks' errors get the checkpoint's name.
            Ok(Err(e)) => Err(Error::Checkpoint {
                checkpoint: name,
                message: e.to_string(),
            }),
            Err(p) => Err(Error::Checkpoint {
                checkpoint: name,
                message: panic_message(&*p),
            }),
        }
    }

    fn run<I, O, F>(self, inputs: I, body: F, at: At) -> Result<O::Output>
    where
        I: CheckpointInputs,
        O: CheckpointOutput,
        F: Fn(I::Owned) -> O,
        F: RecomputableClosure<I::Owned, O>,
    {
        checkpoint_forward::run(self.resolve()?, inputs, body, at)
    }

    /// The call these options make, every default applied.
    fn resolve(self) -> Result<Call> {
        // docs/semantics.md, rule R3: the plan's decision is taken once, here, and
        // kept in the state for every recomputation.
        let decision = auto::resolve(self.name.as_deref());
        let enabled = match self.enabled {
            Enabled::On => true,
            Enabled::Off => false,
            Enabled::Auto => {
                let name = self.name.as_deref().unwrap_or("<unnamed>");
                decision
                    .checkpointed(name)
                    .map_err(|message| Error::Checkpoint {
                        checkpoint: name.to_string(),
                        message,
                    })?
            }
        };
        let how = match (enabled, self.enabled) {
            (false, Enabled::Auto) => Run::SwitchedOff,
            (false, _) => Run::Disabled,
            (true, _) if !grad_enabled() => Run::NoGrad,
            (true, _) => Run::Checkpointed,
        };
        // docs/semantics.md, rule P5: an explicit choice wins over the
        // environment.
        let strict = self.strict.unwrap_or_else(strict_by_default);
        Ok(Call {
            name: self.name.map(Arc::from),
            how,
            auto: self.enabled == Enabled::Auto,
            decision,
            determinism: self.determinism,
            state_hooks: self.state_hooks,
            // An explicit pair wins over one pushed around the checkpoint.
            // docs/semantics.md, rule T4.
            user_hooks: self.saved_tensors_hooks.or_else(TensorHooks::ambient),
            strict,
            // docs/semantics.md, rule C18: the checkpoint's own choice, else
            // the process's; strict recomputation runs the whole closure.
            early_stop: early_stop::available()
                && !strict
                && self.early_stop.unwrap_or_else(early_stop::default_on),
            backward_inside: self.backward_inside,
            preserve_rng_state: self
                .preserve_rng_state
                .unwrap_or_else(random_state::default_on),
        })
    }
}
