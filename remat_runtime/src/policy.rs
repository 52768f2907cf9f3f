//! What a region does on replay (docs/semantics.md, rules R3 and O1).

/// What happens to a region on replay.
///
/// ```
/// use remat_runtime::{checkpoint, region, Policy};
/// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
/// use std::sync::Arc;
///
/// let (saved, recomputed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
/// let (s, r) = (saved.clone(), recomputed.clone());
/// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
/// let y = checkpoint("block").call(&x, move |x| {
///     let h = region("exp", Policy::Save).call(&x, |x| {
///         s.fetch_add(1, SeqCst);
///         x.exp()
///     });
///     region("sin", Policy::Recompute).call(&h, |h| {
///         r.fetch_add(1, SeqCst);
///         h.sin()
///     })
/// });
/// y.sum(tch::Kind::Float).backward();
/// assert_eq!(saved.load(SeqCst), 1); // the forward only
/// assert_eq!(recomputed.load(SeqCst), 2); // the forward and the replay
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Runs only on the forward; what it saves for backward is kept, and on
    /// replay its outputs are served instead of recomputed.
    Save,
    /// Runs on the forward and again on replay (the default of all code in a
    /// checkpoint).
    Recompute,
    /// `Save` or `Recompute` as the active plan decides for this region (by
    /// checkpoint name and region name; see `Plan::activate`). Resolved once,
    /// on the forward, when the checkpoint starts: its replay uses the same
    /// decision on whatever thread autograd runs it. Without an active plan
    /// it means `Recompute`; inside a `Save` region it is a plain call, like
    /// any region there.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, region, Policy};
    /// let x = tch::Tensor::ones([3], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// // No plan is active: `Auto` recomputes.
    /// let y = checkpoint("block").call(&x, |x| region("sin", Policy::Auto).call(&x, |x| x.sin()));
    /// y.sum(tch::Kind::Float).backward();
    /// ```
    Auto,
    /// Like `Save`, but what the region keeps (its saves for backward and
    /// its outputs kept for replay) is copied to the device given (usually
    /// the CPU) and copied back when backward needs it, so it holds no
    /// memory on its own device in between. Parameters stay where they are.
    /// On the CPU with a CPU target the copy is a real copy: the mechanism
    /// and its accounting run, the memory saved is none.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let y = checkpoint("block").call(&x, |x| {
    ///     let h = region("exp", Policy::OFFLOAD).call(&x, |x| x.exp());
    ///     let report = memory_report().unwrap();
    ///     // `exp` saves its result: offloaded, not kept.
    ///     assert_eq!((report.regions[0].bytes(), report.regions[0].offloaded_bytes()), (0, 64));
    ///     h
    /// });
    /// y.sum(tch::Kind::Float).backward();
    /// assert!(x.grad().equal(&x.exp()));
    /// ```
    Offload(tch::Device),
}

impl Policy {
    /// `Offload` to the CPU, the usual target.
    ///
    /// ```
    /// assert_eq!(remat_runtime::Policy::OFFLOAD, remat_runtime::Policy::Offload(tch::Device::Cpu));
    /// ```
    pub const OFFLOAD: Policy = Policy::Offload(tch::Device::Cpu);

    /// The word tables, plans, traces and listings use: `save`,
    /// `recompute`, `auto` or `offload`.
    ///
    /// ```
    /// assert_eq!(remat_runtime::Policy::OFFLOAD.word(), "offload");
    /// ```
    pub fn word(self) -> &'static str {
        match self {
            Policy::Save => "save",
            Policy::Recompute => "recompute",
            Policy::Auto => "auto",
            Policy::Offload(_) => "offload",
        }
    }

    /// Whether the region runs only on the forward (`Save` or `Offload`).
    pub(crate) fn keeps(self) -> bool {
        matches!(self, Policy::Save | Policy::Offload(_))
    }
}
