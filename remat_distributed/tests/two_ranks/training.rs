//! Training steps on two ranks equal one process that averages the two
//! shards' gradients, bit for bit, under every policy, a plan, an offload
//! table and CPU bf16 autocast (docs/semantics.md, rules W4-W7).

use crate::launch::{launch_both, seeded, OUT};
use remat::planner::{profile_with, Plan};
use remat::policies::PolicyTable;
use remat_distributed::{DdpOptions, DistributedDataParallel, ProcessGroup};
use remat_reference::model::{batch, Config, ModelPolicy, Setup, SMALL};
use std::path::PathBuf;
use std::time::Duration;
use tch::{COptimizer, Device, Kind, Tensor};

const STEPS: usize = 3;

/// Each rank's model, run on its shard: two rows of the batch.
const SHARD: Config = Config { b: 2, ..SMALL };
/// The whole batch, split between the ranks.
const WHOLE: Config = Config { b: 4, ..SMALL };

/// How a run's forward is set up beyond its policy.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// fp32, the policy alone (`Auto`: the planner's least-bytes plan).
    Plain,
    /// `ModelPolicy::Auto` under a policy table that keeps the attention's
    /// saves on the CPU (docs/semantics.md, section O): the same numbers as
    /// `selective`, so the fp32 reference.
    OffloadAttention,
    /// The forward under CPU bf16 autocast (replays restore it), against a
    /// reference run under the same autocast.
    Bf16,
}

/// The policies the ranks train under, whether the Reducer is told the
/// graph is static, and the mode.
const RUNS: [(&str, ModelPolicy, bool, Mode); 10] = [
    ("none", ModelPolicy::None, false, Mode::Plain),
    ("full", ModelPolicy::Full, false, Mode::Plain),
    ("selective", ModelPolicy::Selective, false, Mode::Plain),
    ("plan", ModelPolicy::Auto, false, Mode::Plain),
    ("offload", ModelPolicy::Auto, false, Mode::OffloadAttention),
    ("bf16_none", ModelPolicy::None, false, Mode::Bf16),
    ("bf16_full", ModelPolicy::Full, false, Mode::Bf16),
    ("static_none", ModelPolicy::None, true, Mode::Plain),
    ("static_full", ModelPolicy::Full, true, Mode::Plain),
    ("static_plan", ModelPolicy::Auto, true, Mode::Plain),
];

/// The loss of `policy` in `mode`, under `plan` if there is one.
fn loss(
    s: &Setup,
    (tokens, targets): (&Tensor, &Tensor),
    policy: ModelPolicy,
    mode: Mode,
    plan: Option<&Plan>,
) -> Tensor {
    let plain = || s.model.loss(tokens, targets, policy);
    match (mode, plan) {
        (Mode::Bf16, _) => remat::autocast(Device::Cpu, Kind::BFloat16, plain),
        (Mode::OffloadAttention, _) => {
            PolicyTable::save_and_offload_only(Vec::<String>::new(), ["attention"])
                .strict(true)
                .scope(plain)
                .unwrap()
        }
        (Mode::Plain, Some(plan)) => plan.scope(plain),
        (Mode::Plain, None) => plain(),
    }
}

/// Small buckets, so that the model's gradients travel in several.
fn options(static_graph: bool) -> DdpOptions {
    DdpOptions {
        first_bucket_bytes: 16 << 10,
        bucket_bytes: 64 << 10,
        static_graph,
        ..DdpOptions::default()
    }
}

fn adamw(params: &[Tensor]) -> COptimizer {
    let mut opt = COptimizer::adamw(1e-2, 0.9, 0.999, 0.01, 1e-8, false).unwrap();
    for p in params {
        opt.add_parameters(p, 0).unwrap();
    }
    opt
}

fn params(s: &Setup) -> Vec<Tensor> {
    s.model
        .named_parameters()
        .into_iter()
        .map(|(_, t)| t.shallow_clone())
        .collect()
}

/// Rank `r`'s shard of the whole batch: its two rows.
fn shard(r: usize) -> (Tensor, Tensor) {
    let (tokens, targets) = batch(WHOLE, 1);
    let at = r as i64 * SHARD.b;
    (
        tokens.narrow(0, at, SHARD.b),
        targets.narrow(0, at, SHARD.b),
    )
}

fn bits(params: &[Tensor]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in params {
        let v = Vec::<f32>::try_from(p.detach().to_kind(Kind::Float).flatten(0, -1)).unwrap();
        out.extend(v.into_iter().flat_map(|x| x.to_bits().to_le_bytes()));
    }
    out
}

/// One rank: each run from the same start (rank 1's parameters are moved
/// first, so only the broadcast from rank 0 makes them agree), a few AdamW
/// steps, the parameters' bits written after each.
pub fn rank_main() {
    let group = ProcessGroup::from_env().unwrap();
    let rank = group.rank();
    let out = PathBuf::from(std::env::var(OUT).unwrap());
    for (name, policy, static_graph, mode) in RUNS {
        let s = Setup::new(SHARD);
        let (tokens, targets) = shard(rank);
        // Profiled before the Reducer exists: its backward is no step.
        let plan = (policy == ModelPolicy::Auto && mode == Mode::Plain).then(|| {
            let profile = profile_with(|| s.model.loss(&tokens, &targets, policy), 1).unwrap();
            Plan::minimum(&profile)
        });
        s.model.zero_grad();
        let params = params(&s);
        if rank == 1 {
            tch::no_grad(|| {
                for p in &params {
                    let _ = p.shallow_clone().f_add_scalar_(1.0).unwrap();
                }
            });
        }
        let ddp = DistributedDataParallel::new(&group, &params, options(static_graph)).unwrap();
        let buckets = ddp.buckets().unwrap();
        assert!(buckets.len() > 1, "{name}: one bucket only: {buckets:?}");
        let opt = adamw(&params);
        for step in 0..STEPS {
            opt.zero_grad().unwrap();
            let loss = ddp
                .forward(|| loss(&s, (&tokens, &targets), policy, mode, plan.as_ref()))
                .unwrap();
            // A gradient the Reducer saw twice in one backward (once from
            // the graph, once from a replay) fails here (W6).
            loss.f_backward().unwrap();
            // Counted by the bridge's own hooks on each parameter's
            // AccumulateGrad node, not by the Reducer (W9).
            let reports = ddp.last_backward().unwrap().reports;
            assert!(
                reports.len() == params.len() && reports.iter().all(|&n| n == 1),
                "{name}, step {step}: reports per parameter {reports:?}"
            );
            opt.step().unwrap();
            let file = out.join(format!("{name}.rank{rank}.step{step}"));
            std::fs::write(file, bits(&params)).unwrap();
        }
        group.barrier().unwrap();
    }
}

/// One process, no checkpoints: each shard's gradients, averaged as the
/// Reducer does (each halved, then summed), then the same AdamW step; in
/// `Mode::Bf16` under the same autocast.
fn single_process(mode: Mode) -> Vec<Vec<u8>> {
    let s = seeded(|| Setup::new(SHARD));
    let params = params(&s);
    let opt = adamw(&params);
    let mut steps = Vec::new();
    for _ in 0..STEPS {
        opt.zero_grad().unwrap();
        let mut shards = Vec::new();
        for r in 0..2 {
            s.model.zero_grad();
            let (tokens, targets) = shard(r);
            loss(&s, (&tokens, &targets), ModelPolicy::None, mode, None).backward();
            shards.push(params.iter().map(|p| p.grad().copy()).collect::<Vec<_>>());
        }
        tch::no_grad(|| {
            for (i, p) in params.iter().enumerate() {
                let mean = &shards[0][i] * 0.5 + &shards[1][i] * 0.5;
                p.grad().copy_(&mean);
            }
        });
        opt.step().unwrap();
        steps.push(bits(&params));
    }
    steps
}

/// docs/semantics.md, rules W4, W5, W6, W7, W9: after every step the two
/// ranks hold the same parameters, bit for bit, and they are those of one
/// process averaging the shards' gradients, under `none`, `full`,
/// `selective`, a plan and an offload table, with and without
/// `static_graph`, and under bf16 autocast; each parameter reported its
/// gradient once per backward.
#[test]
fn two_ranks_train_as_one_process_averaging_the_shards() {
    tch::set_num_threads(1);
    let (dir, _) = launch_both("train", Duration::from_secs(240));
    let fp32 = single_process(Mode::Plain);
    let bf16 = single_process(Mode::Bf16);
    assert!(
        fp32 != bf16,
        "autocast changed nothing: the bf16 runs test nothing"
    );
    for (name, _, _, mode) in RUNS {
        let expected = if mode == Mode::Bf16 { &bf16 } else { &fp32 };
        for (step, want) in expected.iter().enumerate() {
            let read =
                |r: usize| std::fs::read(dir.join(format!("{name}.rank{r}.step{step}"))).unwrap();
            let (r0, r1) = (read(0), read(1));
            assert!(
                r0 == r1,
                "{name}, step {step}: the ranks' parameters differ"
            );
            assert!(
                &r0 == want,
                "{name}, step {step}: the ranks' parameters differ from one process averaging the shards"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A parameter the loss never reaches, beside one it does.
fn unused_step(
    ddp: &DistributedDataParallel,
    used: &Tensor,
    x: &Tensor,
) -> remat_distributed::Result<()> {
    let loss = ddp.forward(|| x.matmul(used).sum(Kind::Float))?;
    loss.f_backward()
        .map_err(|e| remat_distributed::Error::Collective(e.to_string()))
}

/// One rank of the `find_unused_parameters` checks: with it, steps with an
/// unused parameter finish and the used one's gradient is the mean; without
/// it, the next step says what to set.
pub fn unused_rank_main() {
    let group = ProcessGroup::from_env().unwrap();
    let rank = group.rank() as f64;
    let x = Tensor::full([1, 2], rank + 1.0, (Kind::Float, tch::Device::Cpu));
    for (find, static_graph) in [(true, false), (false, false), (false, true), (true, true)] {
        let used = Tensor::ones([2, 1], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        let unused = Tensor::ones([2, 1], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        let opts = DdpOptions {
            find_unused_parameters: find,
            static_graph,
            ..DdpOptions::default()
        };
        let ddp = DistributedDataParallel::new(
            &group,
            &[used.shallow_clone(), unused.shallow_clone()],
            opts,
        )
        .unwrap();
        let mut results = Vec::new();
        for _ in 0..2 {
            let r = unused_step(&ddp, &used, &x);
            let grad = if used.grad().defined() {
                let g = Vec::<f32>::try_from(used.grad().flatten(0, -1)).unwrap();
                let _ = used.grad().zero_();
                format!("{g:?}")
            } else {
                "none".into()
            };
            results.push(match r {
                Ok(()) => format!("ok {grad}"),
                Err(e) => format!("err {e}"),
            });
        }
        println!(
            "FIND_UNUSED={find} STATIC={static_graph}: {}",
            results.join(" | ")
        );
    }
}

/// docs/semantics.md, rule W7 (and static graphs).
#[test]
fn find_unused_parameters_lets_a_step_leave_a_parameter_unused() {
    let (dir, runs) = launch_both("unused", Duration::from_secs(120));
    for (rank, run) in runs.iter().enumerate() {
        let line = |find: bool, static_graph: bool| {
            let key = format!("FIND_UNUSED={find} STATIC={static_graph}: ");
            run.output
                .lines()
                .find_map(|l| l.split_once(key.as_str()).map(|(_, rest)| rest.to_string()))
                .unwrap_or_else(|| panic!("rank {rank} printed no {key}:\n{}", run.output))
        };
        // Rank r's x is r + 1: the used weight's gradient is x, averaged 1.5.
        assert_eq!(
            line(true, false),
            "ok [1.5, 1.5] | ok [1.5, 1.5]",
            "rank {rank}"
        );
        // A static graph finds the unused parameter in its first backward,
        // with or without the search, as PyTorch's `static_graph=True`.
        for find in [false, true] {
            assert_eq!(
                line(find, true),
                "ok [1.5, 1.5] | ok [1.5, 1.5]",
                "rank {rank}, static graph, find_unused_parameters={find}"
            );
        }
        // Without the search the bucket holding the unused parameter never
        // fills: the first step keeps the rank's own gradient, the next
        // says what to set (as in PyTorch).
        let without = line(false, false);
        let own = format!("ok [{0:.1}, {0:.1}] | err ", rank as f32 + 1.0);
        assert!(without.starts_with(&own), "rank {rank}: {without}");
        assert!(
            without.contains("find_unused_parameters"),
            "rank {rank}: {without}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
