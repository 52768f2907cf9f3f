//! One policy's training run, in its own process: what the forward saves
//! for backward, then AdamW steps with a progress bar, periodic evaluation
//! on fixed batches, and the process's peak resident memory at the end.
//! The planned run (`auto`) first profiles one step and plans for the
//! budget (`budget.rs`), then runs every forward under the plan; with
//! table options it runs them under the policy table instead
//! (`policy_table.rs`).
//!
//! With `--autocast`, every forward (training's, the profile's, the
//! evaluation's) runs inside the one autocast scope of `Options::autocast`;
//! backward and AdamW run outside it, on the fp32 parameters, as with
//! `torch.autocast`.
//!
//! On CUDA each step's time ends after the device has finished its work,
//! and the run reports the CUDA caching allocator's peak allocated bytes
//! over the training steps (the counter is reset after the set-up).
//!
//! In a data-parallel run (`data_parallel.rs`) each step's forward runs
//! on this rank's shard through remat_distributed's DDP, the logged loss
//! is the ranks' mean, and each step reports its time in communication.
//! With `--fsdp` the model is sharded before anything runs: every forward
//! (the set-up's, the profile's, the evaluation's) goes through its units,
//! AdamW steps the shards, and the run reports what a rank holds.
//!
//! Invariant: the only thing that differs between policies is the policy
//! passed to `Model::loss` (and, for `auto`, the plan active around it);
//! parameters, batches, precision and evaluation are the same, so the
//! losses must be too.

use crate::budget;
use crate::corpus::{Corpus, Sampler};
use crate::data_parallel::{self, Parallel, Rank};
use crate::options::{policy_name, Options};
use crate::policy_table;
use crate::protocol::Emit;
use indicatif::{ProgressBar, ProgressStyle};
use remat::diagnostics::{human_bytes, saved_tensors_report, track_saved_tensors};
use remat_reference::measure::peak_resident_bytes;
use remat_reference::model::{Config, Model, ModelPolicy};
use std::time::Instant;
use tch::nn::{self, OptimizerConfig};
use tch::Tensor;

/// Tokens per evaluation, each split: 16 batches of the small config, one
/// of the medium (the same estimate at a cost that does not grow with size).
pub const EVAL_TOKENS: i64 = 1024;

/// Batches per evaluation, each split.
pub fn eval_batches(cfg: Config) -> usize {
    ((EVAL_TOKENS + cfg.b * cfg.t - 1) / (cfg.b * cfg.t)).max(1) as usize
}

/// Evaluations over a run (plus one at the end).
const EVALS: usize = 20;

pub fn run(opts: &Options, policy: ModelPolicy) -> Result<(), String> {
    tch::set_num_threads(opts.threads);
    let cfg = opts.model_config();
    let corpus = Corpus::load();
    let device = opts.device;
    if device.is_cuda() {
        // Without it CUDA's embedding backward adds in a racy order, so the
        // policies' losses (each in its own process) would differ by ulps
        // and `--check` could not hold; run.sh fixes cuBLAS's workspace.
        remat::diagnostics::device::set_deterministic_algorithms(true)
            .map_err(|e| e.to_string())?;
    }
    let init = data_parallel::init_options(opts)?;
    // A rank's model runs on its shard: the config's batch split in N
    // (the parameters do not depend on the batch size).
    let model_cfg = match &init {
        Some(i) => Config {
            b: cfg.b / i.world_size as i64,
            ..cfg
        },
        None => cfg,
    };
    let model = Model::on(model_cfg, opts.seed as i64, device);
    // Sharded before any forward: the units gather what each one runs.
    let sharded = match (&init, opts.fsdp) {
        (Some(i), true) => Some(Rank::join_sharded(i, &model)?),
        _ => None,
    };
    let fsdp = sharded.as_ref().and_then(|r| match &r.parallel {
        Parallel::Fsdp(f) => Some(f),
        Parallel::Ddp(_) => None,
    });
    let mut opt = nn::AdamW::default()
        .build(fsdp.map_or(&model.vs, |f| f.shards()), opts.lr)
        .map_err(|e| format!("AdamW: {e}"))?;
    // The model's loss under a policy: through the units when sharded.
    let model_loss = |x: &Tensor, y: &Tensor, policy: ModelPolicy| match fsdp {
        Some(f) => Rank::sharded_loss(f, &model, x, y, policy),
        None => model.loss(x, y, policy),
    };
    let mut emit = Emit(std::io::stdout().lock());
    let mut batches = Sampler::new(opts.seed);

    // A rank's forward sees its shard of each batch, the profile's included.
    let shard = |t: Tensor| match &init {
        Some(i) => data_parallel::shard(&t, i.rank, i.world_size),
        None => t,
    };
    let (x, y) = batches.clone().batch_on(&corpus.train, cfg, device);
    let (x, y) = (shard(x), shard(y));
    // The model's forward and loss at the run's precision: what the planner
    // profiles and what every step runs.
    let loss = |x: &Tensor, y: &Tensor| opts.autocast.scope(device, || model_loss(x, y, policy));
    let table = match policy {
        ModelPolicy::Auto if opts.has_table() => {
            Some(policy_table::checked(opts, || loss(&x, &y))?)
        }
        _ => None,
    };
    let plan = match policy {
        ModelPolicy::Auto if table.is_none() => {
            // A sharded model's gathered parameters are alive beside every
            // replay (rule F9): the profile's own steps measured them.
            let gathered = || fsdp.map_or(0, |f| f.backward_gathered_peak().unwrap_or(0) as i64);
            Some(budget::plan(opts, || loss(&x, &y), gathered)?)
        }
        _ => None,
    };
    // The forward of every step: under the plan or table, if there is one.
    let forward = |x: &Tensor, y: &Tensor| match (&plan, &table) {
        (Some(planned), _) => planned.plan.scope(|| loss(x, y)),
        // Checked against the model above: no pattern can be malformed.
        (None, Some(table)) => table.scope(|| loss(x, y)).unwrap_or_else(|e| panic!("{e}")),
        (None, None) => loss(x, y),
    };
    let saved = saved_for_backward(|| forward(&x, &y));
    emit.saved(saved.0, saved.1, saved.3, &saved.2);
    if let Some(planned) = &plan {
        emit.plan(&planned.measure(|| forward(&x, &y)));
    }

    // Joined after the set-up's forwards and backward, as the Reducer must
    // see only the training steps' backwards.
    let joined = match (&init, &sharded) {
        (Some(i), None) => Some(Rank::join(i, &model.vs)?),
        _ => None,
    };
    let rank = sharded.as_ref().or(joined.as_ref());

    let bar = ProgressBar::new(opts.steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} steps | {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(policy_name(policy));
    let every = (opts.steps / EVALS).max(1);
    if device.is_cuda() {
        remat::diagnostics::device::reset_cuda_peak(device).map_err(|e| e.to_string())?;
    }
    let started = Instant::now();
    let mut held = None;
    for step in 1..=opts.steps {
        let (x, y) = batches.batch_on(&corpus.train, cfg, device);
        let (x, y) = (shard(x), shard(y));
        remat::diagnostics::device::synchronize(device);
        let t0 = Instant::now();
        let loss = match rank {
            Some(r) => r.forward(|| forward(&x, &y))?,
            None => forward(&x, &y),
        };
        opt.zero_grad();
        match rank {
            // A lost or late peer is an error naming it (rule W8), not a
            // panic out of tch's backward.
            Some(r) => r.backward(&loss)?,
            None => loss.backward(),
        }
        opt.step();
        remat::diagnostics::device::synchronize(device);
        let ns = t0.elapsed().as_nanos() as u64;
        let loss = match rank {
            Some(r) => r.mean_loss(&loss)?,
            None => f64::try_from(&loss).map_err(|e| format!("loss: {e}"))?,
        };
        emit.step(loss, ns);
        if let Some(r) = rank {
            emit.comm(r.comm_ns()?);
            if opts.check {
                r.check_equal(step)?;
            }
        }
        if step == opts.steps {
            // Before the evaluation's forwards start a step of their own.
            held = rank.map(Rank::sharded).transpose()?.flatten();
        }
        if step % every == 0 || step == opts.steps {
            let (train, val) = opts.autocast.scope(device, || {
                evaluate(&model_loss, &corpus, model_cfg, opts.seed, device)
            });
            emit.eval(step, train, val);
        }
        if step == (opts.steps / 10).max(1) {
            emit.early_peak_rss(peak_resident_bytes());
        }
        bar.inc(1);
        bar.set_message(format!(
            "loss {loss:.4} | {:.1} steps/s | saved for backward {}",
            step as f64 / started.elapsed().as_secs_f64(),
            human_bytes(saved.0)
        ));
    }
    bar.finish();
    if let Some(held) = &held {
        emit.sharded(held);
    }
    emit.peak_rss(peak_resident_bytes());
    if device.is_cuda() {
        let memory = remat::diagnostics::device::cuda_memory(device).map_err(|e| e.to_string())?;
        emit.device_peak(memory.peak_allocated);
    }
    Ok(())
}

/// Bytes saved for backward at the forward→backward point, from remat's
/// own report: the total; what is not a checkpoint's own (autograd's saves
/// outside checkpoints, i.e. embeddings, head and loss, plus the inputs
/// checkpoints keep for replay), as the plot's first segment shows it;
/// every checkpoint's share; and what `offload` regions moved off.
fn saved_for_backward(forward: impl FnOnce() -> Tensor) -> (i64, i64, Vec<(String, i64)>, i64) {
    let (loss, outside) = track_saved_tensors(forward);
    let report = saved_tensors_report(Some(&outside));
    let outside = report.outside_bytes().unwrap_or(0) + report.input_bytes();
    let layers: Vec<(String, i64)> = report
        .checkpoints
        .iter()
        .map(|c| (c.checkpoint.clone(), c.bytes()))
        .collect();
    let total = outside + report.checkpoint_bytes();
    let offloaded = report.offloaded_bytes();
    // The gradients this leaves are zeroed before the first step.
    loss.backward();
    (total, outside, layers, offloaded)
}

/// Mean loss on fixed training and validation batches, without autograd
/// (so the same for every policy), at the caller's autocast state.
fn evaluate(
    model_loss: &dyn Fn(&Tensor, &Tensor, ModelPolicy) -> Tensor,
    corpus: &Corpus,
    cfg: Config,
    seed: u64,
    device: tch::Device,
) -> (f64, f64) {
    let mean = |bytes: &[u8]| {
        // Its own stream, so evaluating draws nothing from the training batches.
        let mut batches = Sampler::new(seed ^ 0x5eed_e7a1);
        let n = eval_batches(cfg);
        let sum: f64 = (0..n)
            .map(|_| {
                let (x, y) = batches.batch_on(bytes, cfg, device);
                let loss = tch::no_grad(|| model_loss(&x, &y, ModelPolicy::None));
                f64::try_from(&loss).expect("a scalar loss")
            })
            .sum();
        sum / n as f64
    };
    (mean(&corpus.train), mean(&corpus.val))
}
