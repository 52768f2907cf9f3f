//! What a child process reports to its parent: one line per fact on stdout,
//! `key value...`, and the parsed form, `RunResult`.
//!
//! Invariant: losses are written with Rust's shortest round-trip float
//! formatting, so the parent compares the exact values the child computed.

use crate::data_parallel::Sharded;
use remat_reference::model::ModelPolicy;
use remat_reference::numbers::median;
use std::io::Write;

/// Everything one policy's run measured.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub policy: ModelPolicy,
    /// Bytes saved for backward after the forward of the first batch.
    pub saved_total: i64,
    /// The part that is no checkpoint's own: saves outside checkpoints and
    /// the inputs checkpoints keep (all of it under `none`).
    pub saved_outside: i64,
    /// Each live checkpoint's share, in forward order.
    pub saved_layers: Vec<(String, i64)>,
    /// Bytes `offload` regions moved off the device (not in `saved_total`).
    pub offloaded: i64,
    /// The training loss of each step.
    pub step_loss: Vec<f64>,
    /// The wall time of each step (forward, backward, optimizer), ns.
    pub step_ns: Vec<u64>,
    /// `(step, train loss, validation loss)` on fixed held-out batches.
    pub evals: Vec<(usize, f64, f64)>,
    /// The child's peak resident memory, bytes.
    pub peak_rss: Option<u64>,
    /// The same after the first tenth of the steps: memory is flat when the
    /// peak no longer grows after it.
    pub early_peak_rss: Option<u64>,
    /// The planned run's prediction and what it measured (`auto` only).
    pub plan: Option<PlanNumbers>,
    /// On CUDA: the caching allocator's peak allocated bytes over the steps.
    pub device_peak: Option<i64>,
    /// In a data-parallel run: each step's time in c10d communication, ns.
    pub comm_ns: Vec<u64>,
    /// Under `--fsdp`: what the rank holds and gathered.
    pub sharded: Option<Sharded>,
}

/// What the planned run predicted from its profile and measured on the
/// first batch under the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanNumbers {
    /// `plan.predicted.kept_bytes`: the planner's count, the table's count
    /// (checkpoints' saves, the inputs they keep, saves outside them).
    pub predicted_kept: i64,
    /// `plan.predicted.peak_bytes`.
    pub predicted_peak: i64,
    /// `plan.predicted.replay_ns`.
    pub replay_ns: u64,
    /// `measure_kept_bytes` of the first batch's forward under the plan.
    pub measured_kept: i64,
}

impl RunResult {
    pub fn median_step_ns(&self) -> u64 {
        median(self.step_ns.iter().copied()).unwrap_or(0)
    }

    /// Time in communication over step time, over all steps; `None`
    /// outside a data-parallel run.
    pub fn comm_share(&self) -> Option<f64> {
        let steps: u64 = self.step_ns.iter().sum();
        (!self.comm_ns.is_empty() && steps > 0)
            .then(|| self.comm_ns.iter().sum::<u64>() as f64 / steps as f64)
    }
}

/// The child's side: writes the lines.
pub struct Emit<W: Write>(pub W);

impl<W: Write> Emit<W> {
    pub fn saved(&mut self, total: i64, outside: i64, offloaded: i64, layers: &[(String, i64)]) {
        self.line(format_args!("saved {total} {outside} {offloaded}"));
        for (name, bytes) in layers {
            self.line(format_args!("layer {name} {bytes}"));
        }
    }

    pub fn plan(&mut self, p: &PlanNumbers) {
        self.line(format_args!(
            "plan {} {} {} {}",
            p.predicted_kept, p.predicted_peak, p.replay_ns, p.measured_kept
        ));
    }

    pub fn step(&mut self, loss: f64, ns: u64) {
        self.line(format_args!("step {loss} {ns}"));
    }

    pub fn eval(&mut self, step: usize, train: f64, val: f64) {
        self.line(format_args!("eval {step} {train} {val}"));
    }

    pub fn peak_rss(&mut self, bytes: Option<u64>) {
        if let Some(b) = bytes {
            self.line(format_args!("peak_rss {b}"));
        }
    }

    pub fn comm(&mut self, ns: u64) {
        self.line(format_args!("comm {ns}"));
    }

    pub fn sharded(&mut self, s: &Sharded) {
        self.line(format_args!(
            "sharded {} {} {} {} {} {}",
            s.params, s.grads, s.optimizer, s.gathered, s.prefetched, s.gathers
        ));
    }

    pub fn device_peak(&mut self, bytes: i64) {
        self.line(format_args!("device_peak {bytes}"));
    }

    pub fn early_peak_rss(&mut self, bytes: Option<u64>) {
        if let Some(b) = bytes {
            self.line(format_args!("early_peak_rss {b}"));
        }
    }

    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        writeln!(self.0, "{args}").expect("the parent reads our stdout");
    }
}

/// The parent's side: the result of `policy`'s run from the child's stdout.
pub fn parse(policy: ModelPolicy, text: &str) -> Result<RunResult, String> {
    let mut r = RunResult {
        policy,
        saved_total: 0,
        saved_outside: 0,
        saved_layers: Vec::new(),
        offloaded: 0,
        step_loss: Vec::new(),
        step_ns: Vec::new(),
        evals: Vec::new(),
        peak_rss: None,
        early_peak_rss: None,
        plan: None,
        device_peak: None,
        comm_ns: Vec::new(),
        sharded: None,
    };
    for line in text.lines() {
        let bad = || format!("unexpected line from the training process: {line:?}");
        let mut words = line.split_whitespace();
        let mut num = |what: &str| -> Result<String, String> {
            words
                .next()
                .map(str::to_string)
                .ok_or_else(|| format!("{} ({what} missing)", bad()))
        };
        match num("key")?.as_str() {
            "saved" => {
                r.saved_total = num("total")?.parse().map_err(|_| bad())?;
                r.saved_outside = num("outside")?.parse().map_err(|_| bad())?;
                r.offloaded = num("offloaded")?.parse().map_err(|_| bad())?;
            }
            "layer" => {
                let name = num("name")?;
                r.saved_layers
                    .push((name, num("bytes")?.parse().map_err(|_| bad())?));
            }
            "plan" => {
                r.plan = Some(PlanNumbers {
                    predicted_kept: num("kept")?.parse().map_err(|_| bad())?,
                    predicted_peak: num("peak")?.parse().map_err(|_| bad())?,
                    replay_ns: num("replay")?.parse().map_err(|_| bad())?,
                    measured_kept: num("measured")?.parse().map_err(|_| bad())?,
                })
            }
            "step" => {
                r.step_loss.push(num("loss")?.parse().map_err(|_| bad())?);
                r.step_ns.push(num("ns")?.parse().map_err(|_| bad())?);
            }
            "eval" => r.evals.push((
                num("step")?.parse().map_err(|_| bad())?,
                num("train")?.parse().map_err(|_| bad())?,
                num("val")?.parse().map_err(|_| bad())?,
            )),
            "comm" => r.comm_ns.push(num("ns")?.parse().map_err(|_| bad())?),
            "sharded" => {
                r.sharded = Some(Sharded {
                    params: num("params")?.parse().map_err(|_| bad())?,
                    grads: num("grads")?.parse().map_err(|_| bad())?,
                    optimizer: num("optimizer")?.parse().map_err(|_| bad())?,
                    gathered: num("gathered")?.parse().map_err(|_| bad())?,
                    prefetched: num("prefetched")?.parse().map_err(|_| bad())?,
                    gathers: num("gathers")?.parse().map_err(|_| bad())?,
                })
            }
            "device_peak" => r.device_peak = Some(num("bytes")?.parse().map_err(|_| bad())?),
            "peak_rss" => r.peak_rss = Some(num("bytes")?.parse().map_err(|_| bad())?),
            "early_peak_rss" => r.early_peak_rss = Some(num("bytes")?.parse().map_err(|_| bad())?),
            _ => return Err(bad()),
        }
    }
    Ok(r)
}
