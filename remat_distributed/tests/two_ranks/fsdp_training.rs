//! Sharded training on 2 and 4 ranks equals one process that averages the
//! ranks' gradients, bit for bit, under no checkpoints, `full`, a
//! `Save`-region policy, a plan, CPU bf16 autocast, an offload table (and
//! offloaded shards), bf16 parameters, a bf16 reduction, kept parameters, a
//! unit inside its checkpoint, with tch's AdamW and SGD on the shards; each
//! unit gathered once for its forward and once for its backward
//! (docs/semantics.md, rules F1-F5, F8).

use crate::launch::{launch_all, seeded, OUT};
use crate::sharded_model::{block_units, shard, sharded_loss};
use remat::planner::{profile_with, Plan};
use remat::policies::PolicyTable;
use remat_distributed::{FsdpEventKind, FsdpOptions, FullyShardedDataParallel, ProcessGroup};
use remat_reference::model::{batch, block_body, Config, ModelPolicy, Setup, SMALL};
use std::path::PathBuf;
use std::time::Duration;
use tch::{COptimizer, Device, Kind, Tensor};

const STEPS: usize = 3;

/// The whole batch, split between the ranks.
const WHOLE: Config = Config { b: 4, ..SMALL };

/// Each rank's model: its share of the batch's rows.
fn shard_config(world: usize) -> Config {
    Config {
        b: WHOLE.b / world as i64,
        ..SMALL
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Plain,
    /// Each block's unit runs inside its checkpoint, so that the
    /// checkpoint's recomputation runs the unit's forward again (rule F4).
    UnitInCheckpoint,
    /// `Auto` under a table that offloads the attention's saves.
    OffloadAttention,
    /// Under CPU bf16 autocast.
    Bf16,
    /// fp32 throughout, gradients summed over the ranks in bf16
    /// (`FsdpOptions::reduce_dtype`).
    Bf16Reduce,
    /// Parameters gathered and computed in bf16, gradients reduced in fp32
    /// (`FsdpOptions::param_dtype`), under bf16 autocast too: the reference
    /// model's attention asks its softmax for fp32, which autocast casts
    /// back for the next matmul.
    Bf16Params,
}

/// One run of the ranks.
struct Run {
    name: &'static str,
    policy: ModelPolicy,
    mode: Mode,
    /// Parameters stay gathered from forward to backward.
    kept: bool,
    /// Shards on the CPU (the same device here: the path is exercised).
    offload_shards: bool,
    /// SGD instead of AdamW.
    sgd: bool,
}

const fn run(name: &'static str, policy: ModelPolicy, mode: Mode) -> Run {
    Run {
        name,
        policy,
        mode,
        kept: false,
        offload_shards: false,
        sgd: false,
    }
}

const RUNS: [Run; 13] = [
    run("none", ModelPolicy::None, Mode::Plain),
    run("full", ModelPolicy::Full, Mode::Plain),
    run("selective", ModelPolicy::Selective, Mode::Plain),
    run("plan", ModelPolicy::Auto, Mode::Plain),
    run("offload", ModelPolicy::Auto, Mode::OffloadAttention),
    Run {
        offload_shards: true,
        ..run("offload_both", ModelPolicy::Auto, Mode::OffloadAttention)
    },
    run("bf16_full", ModelPolicy::Full, Mode::Bf16),
    run("bf16_params_full", ModelPolicy::Full, Mode::Bf16Params),
    run("bf16_reduce_full", ModelPolicy::Full, Mode::Bf16Reduce),
    Run {
        kept: true,
        ..run("kept_full", ModelPolicy::Full, Mode::Plain)
    },
    Run {
        kept: true,
        ..run("kept_none", ModelPolicy::None, Mode::Plain)
    },
    run("unit_in_full", ModelPolicy::Full, Mode::UnitInCheckpoint),
    Run {
        sgd: true,
        ..run("sgd_full", ModelPolicy::Full, Mode::Plain)
    },
];

/// The model's loss with each block a unit and the rest the `root` unit;
/// in `Mode::UnitInCheckpoint` each block's unit runs inside its checkpoint.
fn loss_of(
    s: &Setup,
    fsdp: &FullyShardedDataParallel,
    (tokens, targets): (&Tensor, &Tensor),
    policy: ModelPolicy,
    mode: Mode,
) -> Tensor {
    if mode != Mode::UnitInCheckpoint {
        return sharded_loss(fsdp, &s.model, (tokens, targets), policy);
    }
    fsdp.unit("root", || {
        s.model.loss_through(tokens, targets, |mut x| {
            for (block, name) in s.model.blocks.iter().zip(block_units(&s.model)) {
                let unit = fsdp.handle(&name).unwrap();
                let owned = block.shallow();
                x = remat::checkpoint(name).call(&x, move |x| {
                    unit.forward(|| block_body(&owned, &x, ModelPolicy::Full))
                        .unwrap()
                });
            }
            x
        })
    })
    .unwrap()
}

fn in_mode(mode: Mode, plan: Option<&Plan>, f: impl FnOnce() -> Tensor) -> Tensor {
    match (mode, plan) {
        (Mode::Bf16 | Mode::Bf16Params, _) => remat::autocast(Device::Cpu, Kind::BFloat16, f),
        (Mode::OffloadAttention, _) => {
            PolicyTable::save_and_offload_only(Vec::<String>::new(), ["attention"])
                .strict(true)
                .scope(f)
                .unwrap()
        }
        (_, Some(plan)) => plan.scope(f),
        (Mode::Plain | Mode::UnitInCheckpoint | Mode::Bf16Reduce, None) => f(),
    }
}

/// The run's optimizer on `params`: tch's AdamW, or its SGD with momentum
/// and weight decay.
fn optimizer(params: &[Tensor], sgd: bool) -> COptimizer {
    let mut opt = if sgd {
        COptimizer::sgd(1e-1, 0.9, 0.0, 0.01, false).unwrap()
    } else {
        COptimizer::adamw(1e-2, 0.9, 0.999, 0.01, 1e-8, false).unwrap()
    };
    for p in params {
        opt.add_parameters(p, 0).unwrap();
    }
    opt
}

/// Rank `r`'s rows of the whole batch.
fn rows(r: usize, world: usize) -> (Tensor, Tensor) {
    let (tokens, targets) = batch(WHOLE, 1);
    let n = WHOLE.b / world as i64;
    let at = r as i64 * n;
    (tokens.narrow(0, at, n), targets.narrow(0, at, n))
}

fn bits(named: &[(String, Tensor)]) -> Vec<u8> {
    let mut sorted: Vec<&(String, Tensor)> = named.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    for (_, p) in sorted {
        let v = Vec::<f32>::try_from(p.detach().to_kind(Kind::Float).flatten(0, -1)).unwrap();
        out.extend(v.into_iter().flat_map(|x| x.to_bits().to_le_bytes()));
    }
    out
}

/// One rank: every run from the same start (rank 1 and up move their
/// parameters first, so only the broadcast from rank 0 makes them agree),
/// a few AdamW steps on the shards, the full parameters' bits after each.
pub fn rank_main() {
    let group = ProcessGroup::from_env().unwrap();
    let (rank, world) = (group.rank(), group.world_size());
    let out = PathBuf::from(std::env::var(OUT).unwrap());
    for Run {
        name,
        policy,
        mode,
        kept,
        offload_shards,
        sgd,
    } in RUNS
    {
        let s = Setup::new(shard_config(world));
        let (tokens, targets) = rows(rank, world);
        let plan = (policy == ModelPolicy::Auto && mode == Mode::Plain).then(|| {
            let profile = profile_with(|| s.model.loss_api(&tokens, &targets, policy), 1).unwrap();
            Plan::minimum(&profile)
        });
        s.model.zero_grad();
        if rank > 0 {
            tch::no_grad(|| {
                for (_, p) in s.model.named_parameters() {
                    let _ = p.shallow_clone().f_add_scalar_(1.0).unwrap();
                }
            });
        }
        let options = FsdpOptions {
            reshard_after_forward: !kept,
            // Two ranks sum in either order alike; four need rank order.
            rank_ordered_reduce: world > 2,
            offload_shards,
            param_dtype: (mode == Mode::Bf16Params).then_some(Kind::BFloat16),
            reduce_dtype: (mode == Mode::Bf16Reduce).then_some(Kind::BFloat16),
            ..FsdpOptions::default()
        };
        let fsdp = shard(&group, &s.model, options);
        assert_eq!(s.model.blocks[0].qkv_w.size(), [0], "{name}: not freed");
        let shards: Vec<Tensor> = fsdp
            .units()
            .iter()
            .map(|u| fsdp.shard(u).unwrap())
            .collect();
        let opt = optimizer(&shards, sgd);
        for step in 0..STEPS {
            opt.zero_grad().unwrap();
            let loss = in_mode(mode, plan.as_ref(), || {
                loss_of(&s, &fsdp, (&tokens, &targets), policy, mode)
            });
            fsdp.backward(&loss).unwrap();
            assert_eq!(fsdp.gathered_bytes().unwrap(), 0, "{name}: left gathered");
            // One gather for the forward and one for the backward (one in
            // all when kept): a checkpoint's recomputation, inside the unit
            // or around it, issues none of its own (rule F4).
            let stats = fsdp.last_step().unwrap();
            for unit in fsdp.units() {
                let gathers = stats
                    .events
                    .iter()
                    .filter(|e| e.unit == unit)
                    .filter(|e| {
                        matches!(
                            e.kind,
                            FsdpEventKind::GatherLaunch | FsdpEventKind::Prefetch
                        )
                    })
                    .count();
                assert_eq!(gathers, if kept { 1 } else { 2 }, "{name}: unit {unit}");
            }
            assert!(
                !s.model.blocks[0].qkv_w.grad().defined(),
                "{name}: a full gradient was kept"
            );
            opt.step().unwrap();
            let full = fsdp.full_state_dict().unwrap();
            let file = out.join(format!("{name}.rank{rank}.step{step}"));
            std::fs::write(file, bits(&full)).unwrap();
        }
        if name == "none" {
            reload(&group, &fsdp, world);
        }
        group.barrier().unwrap();
    }
}

/// A full state dict loaded into a fresh sharded model gives back the same
/// full state dict on every rank; a missing or misshapen parameter is an
/// error naming it.
fn reload(group: &ProcessGroup, trained: &FullyShardedDataParallel, world: usize) {
    let full = trained.full_state_dict().unwrap();
    let s = Setup::new(shard_config(world));
    let fresh = shard(group, &s.model, FsdpOptions::default());
    assert!(bits(&fresh.full_state_dict().unwrap()) != bits(&full));
    fresh.load_full_state_dict(&full).unwrap();
    assert!(bits(&fresh.full_state_dict().unwrap()) == bits(&full));
    let missing: Vec<(String, Tensor)> = full
        .iter()
        .filter(|(n, _)| n != "head.bias")
        .map(|(n, t)| (n.clone(), t.shallow_clone()))
        .collect();
    let err = fresh
        .load_full_state_dict(&missing)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("parameter `head.bias` of unit `root` is missing"),
        "{err}"
    );
    let mut wrong = missing;
    wrong.push((
        "head.bias".into(),
        Tensor::zeros([3], (Kind::Float, Device::Cpu)),
    ));
    let err = fresh.load_full_state_dict(&wrong).unwrap_err().to_string();
    assert!(err.contains("`head.bias` has shape [3]"), "{err}");
}

/// One process, no checkpoints, the whole model: each rank's rows'
/// gradients, each scaled by 1 / world and summed in rank order, then the
/// same AdamW step. In `Mode::Bf16Params` the rows run on a bf16 copy of
/// the parameters and their gradients are cast to fp32; in
/// `Mode::Bf16Reduce` the scaling and the sum are in bf16.
fn single_process(mode: Mode, world: usize, sgd: bool) -> Vec<Vec<u8>> {
    let s = seeded(|| Setup::new(shard_config(world)));
    let named: Vec<(String, Tensor)> = s
        .model
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (n, t.shallow_clone()))
        .collect();
    let params: Vec<Tensor> = named.iter().map(|(_, t)| t.shallow_clone()).collect();
    let mut low = (mode == Mode::Bf16Params).then(|| s.model.deep_copy());
    if let Some(m) = low.as_mut() {
        m.vs.bfloat16();
    }
    let model = low.as_ref().unwrap_or(&s.model);
    let copies: Vec<Tensor> = model
        .named_parameters()
        .into_iter()
        .map(|(_, t)| t.shallow_clone())
        .collect();
    let opt = optimizer(&params, sgd);
    let mut steps = Vec::new();
    for _ in 0..STEPS {
        opt.zero_grad().unwrap();
        // Gradients of the fp32 parameters, for the mean to be written
        // into (zero_grad leaves none).
        for p in &params {
            (p * 0.0).sum(Kind::Float).backward();
        }
        if low.is_some() {
            tch::no_grad(|| {
                for (c, p) in copies.iter().zip(&params) {
                    c.shallow_clone().copy_(p);
                }
            });
        }
        let mut grads = Vec::new();
        for r in 0..world {
            model.zero_grad();
            let (tokens, targets) = rows(r, world);
            in_mode(mode, None, || {
                model.loss_api(&tokens, &targets, ModelPolicy::None)
            })
            .backward();
            grads.push(
                copies
                    .iter()
                    .map(|p| p.grad().to_kind(Kind::Float).copy())
                    .collect::<Vec<_>>(),
            );
        }
        let sum_kind = match mode {
            Mode::Bf16Reduce => Kind::BFloat16,
            _ => Kind::Float,
        };
        tch::no_grad(|| {
            for (i, p) in params.iter().enumerate() {
                let scale = 1.0 / world as f64;
                let mut mean = grads[0][i].to_kind(sum_kind) * scale;
                for g in &grads[1..] {
                    mean += g[i].to_kind(sum_kind) * scale;
                }
                p.grad().copy_(&mean.to_kind(Kind::Float));
            }
        });
        opt.step().unwrap();
        steps.push(bits(&named));
    }
    steps
}

fn check_world(world: usize) {
    tch::set_num_threads(1);
    let (dir, _) = launch_all("fsdp_train", world, Duration::from_secs(400));
    let fp32 = single_process(Mode::Plain, world, false);
    let bf16 = single_process(Mode::Bf16, world, false);
    let bf16_params = single_process(Mode::Bf16Params, world, false);
    let bf16_reduce = single_process(Mode::Bf16Reduce, world, false);
    assert!(fp32 != bf16_reduce, "a bf16 reduction changed nothing");
    let sgd = single_process(Mode::Plain, world, true);
    assert!(fp32 != sgd, "SGD changed nothing");
    assert!(fp32 != bf16, "autocast changed nothing");
    assert!(
        fp32 != bf16_params && bf16 != bf16_params,
        "bf16 parameters changed nothing"
    );
    for Run {
        name,
        mode,
        sgd: with_sgd,
        ..
    } in RUNS
    {
        let expected = match mode {
            _ if with_sgd => &sgd,
            Mode::Bf16 => &bf16,
            Mode::Bf16Params => &bf16_params,
            Mode::Bf16Reduce => &bf16_reduce,
            _ => &fp32,
        };
        for (step, want) in expected.iter().enumerate() {
            let read =
                |r: usize| std::fs::read(dir.join(format!("{name}.rank{r}.step{step}"))).unwrap();
            let first = read(0);
            for r in 1..world {
                assert!(
                    first == read(r),
                    "{name}, step {step}: ranks 0 and {r} differ"
                );
            }
            assert!(
                &first == want,
                "{name}, step {step}: {world} ranks differ from one process averaging their rows"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// docs/semantics.md, rules F1-F5 on two ranks.
#[test]
fn sharded_training_on_two_ranks_equals_one_process() {
    check_world(2);
}

/// docs/semantics.md, rules F1-F5 on four ranks.
#[test]
fn sharded_training_on_four_ranks_equals_one_process() {
    check_world(4);
}
