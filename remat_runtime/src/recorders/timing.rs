//! Forward timings for the planner: per checkpoint call, the time of its
//! closure and of each region body inside it.
//!
//! Off by default. A checkpoint looks at the thread's sink once, when it
//! starts, and keeps the record in its state; its regions then only test
//! that field (`None` when off), so the per-region path pays nothing more.
//! Forward runs record their closure and regions; a replay records only
//! its own duration (what the planner's calibration costs a choice by).

use crate::bridge::{sequence_number, storage_key, storage_nbytes};
use crate::policy::Policy;
use crate::sync::lock;
use std::cell::RefCell;
use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tch::Tensor;

/// A wall-clock timer for profiled code that waits for queued GPU work at
/// both ends: CUDA kernels run asynchronously, so without that the time
/// would be the time of launching them. Only the profiler uses it, so
/// training pays nothing.
pub(crate) struct DeviceTimer(Instant);

impl DeviceTimer {
    pub(crate) fn start() -> DeviceTimer {
        synchronize_devices();
        DeviceTimer(Instant::now())
    }

    pub(crate) fn elapsed(&self) -> Duration {
        synchronize_devices();
        self.0.elapsed()
    }
}

fn synchronize_devices() {
    static DEVICES: OnceLock<i64> = OnceLock::new();
    let n = *DEVICES.get_or_init(|| {
        if tch::Cuda::is_available() {
            tch::Cuda::device_count()
        } else {
            0
        }
    });
    for device in 0..n {
        tch::Cuda::synchronize(device);
    }
}

/// One region body run on a checkpoint's forward.
#[derive(Clone, Debug)]
pub(crate) struct RegionCall {
    pub name: String,
    /// As written (`Auto` for a planned region).
    pub declared: Policy,
    /// When it started, from the start of the checkpoint's closure.
    pub start: Duration,
    pub elapsed: Duration,
}

/// One checkpoint call's forward.
#[derive(Clone, Debug, Default)]
pub(crate) struct CheckpointCall {
    pub name: Option<String>,
    /// Built with `auto()`: the plan may turn it off.
    pub auto: bool,
    /// Shapes of the inputs, in order (what makes layers alike).
    pub input_sizes: Vec<Vec<i64>>,
    /// Bytes of the inputs' distinct storages (what it keeps as inputs).
    pub input_bytes: i64,
    /// Whether it ran as a checkpoint (not a plain call).
    pub checkpointed: bool,
    /// The closure's forward, region bodies included.
    pub elapsed: Duration,
    /// When the closure started (set as it starts).
    pub started: Option<Instant>,
    /// Its replays stop early (docs/semantics.md, rule C17).
    pub early_stop: bool,
    /// When each save that became a holder was made, from the closure's
    /// start: where an early-stopped replay may end.
    pub saves: Vec<Duration>,
    /// The sizes and element type of every tensor the forward saved, in
    /// order: what the body keeps, which checkpoints of one kind share
    /// (docs/planner.md, "Kinds").
    pub saved_shapes: Vec<(Vec<i64>, tch::Kind)>,
    pub regions: Vec<RegionCall>,
    /// Time spent replaying it inside backward, all replays summed (a
    /// retained graph replays once per backward).
    pub replay: Duration,
    /// Leaves that require grad (parameters) saved inside it: the
    /// calibration's backward computes their gradients too, so that it does
    /// a real step's work in the block (see `planner::profile`).
    pub leaves: Handles,
    /// The autograd sequence numbers of the nodes its forward made: from
    /// the first (taken as the call started) to one past the last (as its
    /// closure returned). The profile's backward trace tells by them which
    /// checkpoint's backward a node belongs to.
    pub nodes: (i64, i64),
}

/// Shallow handles to tensors; a clone shares them.
#[derive(Debug, Default)]
pub(crate) struct Handles(pub Vec<Tensor>);

impl Clone for Handles {
    fn clone(&self) -> Self {
        Handles(self.0.iter().map(Tensor::shallow_clone).collect())
    }
}

/// Notes a tensor a checkpoint's forward saved: its shape, and the tensor
/// itself when it is a leaf that requires grad (only while profiling:
/// `call` is the checkpoint's record).
pub(crate) fn note_saved(call: &Mutex<CheckpointCall>, tensor: &Tensor) {
    let mut call = lock(call);
    call.saved_shapes.push((tensor.size(), tensor.kind()));
    if tensor.requires_grad() && tensor.is_leaf() {
        call.leaves.0.push(tensor.shallow_clone());
    }
}

/// The time since `call`'s closure started (zero before it starts).
pub(crate) fn since_start(call: &Mutex<CheckpointCall>) -> Duration {
    let started = lock(call).started;
    synchronize_devices();
    started.map_or(Duration::ZERO, |s| s.elapsed())
}

/// Runs a profiled checkpoint's closure on its forward, timing it and
/// noting where its nodes end.
pub(crate) fn time_forward<R>(
    call: &Mutex<CheckpointCall>,
    early_stop: bool,
    body: impl FnOnce() -> R,
) -> R {
    let start = DeviceTimer::start();
    {
        let mut call = lock(call);
        call.started = Some(Instant::now());
        call.early_stop = early_stop;
    }
    let out = body();
    let mut call = lock(call);
    call.elapsed = start.elapsed();
    call.checkpointed = true;
    call.nodes.1 = sequence_number();
    out
}

/// Notes when a checkpoint's forward made a save that became a holder
/// (only while profiling).
pub(crate) fn note_holder(call: &Mutex<CheckpointCall>) {
    let at = since_start(call);
    lock(call).saves.push(at);
}

/// Adds the time from its start to its drop to a call's replay time
/// (only while profiling: `call` is the checkpoint's record).
pub(crate) struct ReplayTimer<'a> {
    call: &'a Mutex<CheckpointCall>,
    timer: DeviceTimer,
}

impl<'a> ReplayTimer<'a> {
    pub(crate) fn start(call: &'a Mutex<CheckpointCall>) -> ReplayTimer<'a> {
        ReplayTimer {
            call,
            timer: DeviceTimer::start(),
        }
    }
}

impl Drop for ReplayTimer<'_> {
    fn drop(&mut self) {
        let elapsed = self.timer.elapsed();
        lock(self.call).replay += elapsed;
    }
}

/// Where a profiling run's records go.
#[derive(Default)]
pub(crate) struct ProfileSink {
    pub calls: Mutex<Vec<Arc<Mutex<CheckpointCall>>>>,
    /// Calibration runs only: the inputs that require grad of every
    /// checkpoint call, checkpointed or not (the profiler's backward
    /// computes gradients for these, so that it replays every checkpoint
    /// downstream without touching parameters' gradients).
    pub grad_inputs: Option<Mutex<Vec<Tensor>>>,
    /// Named checkpoint calls that ran as plain code (disabled, or turned
    /// off by a plan), with the sequence numbers of the nodes they made
    /// (see [`CheckpointCall::nodes`]).
    pub plain: Mutex<Vec<(String, (i64, i64))>>,
}

/// Notes a checkpoint call's inputs for a calibration run (see
/// [`ProfileSink::grad_inputs`]); nothing when not profiling.
pub(crate) fn note_inputs(inputs: &[Option<Tensor>]) {
    SINK.with(|s| {
        if let Some(sink) = s.borrow().as_ref() {
            note_into(sink, inputs);
        }
    });
}

/// Runs a checkpoint call that runs as plain code, noting the nodes it
/// makes when profiling (see [`ProfileSink::plain`]).
pub(crate) fn plain_call<R>(name: Option<&str>, body: impl FnOnce() -> R) -> R {
    let sink = SINK.with(|s| s.borrow().clone());
    let (Some(sink), Some(name)) = (sink, name) else {
        return body();
    };
    let from = sequence_number();
    let out = body();
    lock(&sink.plain).push((name.to_string(), (from, sequence_number())));
    out
}

fn note_into(sink: &ProfileSink, inputs: &[Option<Tensor>]) {
    if let Some(grad_inputs) = &sink.grad_inputs {
        lock(grad_inputs).extend(
            inputs
                .iter()
                .flatten()
                .filter(|t| t.requires_grad())
                .map(Tensor::shallow_clone),
        );
    }
}

thread_local! {
    static SINK: RefCell<Option<Arc<ProfileSink>>> = const { RefCell::new(None) };
}

/// Restores the previous sink when dropped.
pub(crate) struct SinkGuard {
    previous: Option<Arc<ProfileSink>>,
    _not_send: PhantomData<*const ()>,
}

/// Records checkpoint calls started on this thread into `sink` until the
/// guard drops.
pub(crate) fn record_into(sink: Arc<ProfileSink>) -> SinkGuard {
    let previous = SINK.with(|s| s.borrow_mut().replace(sink));
    SinkGuard {
        previous,
        _not_send: PhantomData,
    }
}

impl Drop for SinkGuard {
    fn drop(&mut self) {
        SINK.with(|s| *s.borrow_mut() = self.previous.take());
    }
}

/// A new record for a checkpoint call, when profiling is on.
pub(crate) fn start_call(
    name: Option<&str>,
    auto: bool,
    inputs: &[Option<Tensor>],
) -> Option<Arc<Mutex<CheckpointCall>>> {
    let sink = SINK.with(|s| s.borrow().clone())?;
    note_into(&sink, inputs);
    let mut seen = HashSet::new();
    let mut input_bytes = 0;
    for t in inputs.iter().flatten() {
        if let Some(key) = storage_key(t) {
            if seen.insert(key) {
                input_bytes += storage_nbytes(t);
            }
        }
    }
    let call = Arc::new(Mutex::new(CheckpointCall {
        name: name.map(str::to_string),
        auto,
        input_sizes: inputs.iter().flatten().map(Tensor::size).collect(),
        input_bytes,
        nodes: (sequence_number(), i64::MAX),
        ..CheckpointCall::default()
    }));
    lock(&sink.calls).push(call.clone());
    Some(call)
}
