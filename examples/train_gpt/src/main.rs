//! Trains remat's reference model (docs/reference-model.md) on a
//! byte corpus under each checkpointing policy, each in its own process, and
//! reports per policy: final losses, median step time, bytes saved for
//! backward and peak resident memory; then one block's memory report and
//! two SVG plots. With `--budget`, an `auto` run plans for the budget and
//! trains under the plan; its plan and predicted-against-measured bytes and
//! time follow the table. With `--autocast bf16` every forward runs under
//! CPU autocast (mixed precision) and the same checks hold. `--device cuda`
//! trains on a GPU (autocast is then CUDA's); the table then also holds
//! each policy's peak allocated bytes from the CUDA caching allocator.
//! The parent also writes `<out>/summary.tsv`, the table's numbers for
//! scripts (the GPU kit reads it).
//!
//! Invariant: the parent process never trains; each policy's numbers,
//! peak memory included, come from a fresh child process of its own.

mod block_report;
mod budget;
mod corpus;
mod data_parallel;
mod format;
mod options;
mod plot;
mod policy_table;
mod protocol;
mod ranks;
mod table;
mod train;

use clap::Parser;
use options::{policy_name, Options};
use remat_reference::model::ModelPolicy;
use std::process::{Command, ExitCode, Stdio};

/// glibc's threshold above which allocations are mmapped and so returned to
/// the kernel when freed; fixed, it also stops glibc from raising it.
const MMAP_THRESHOLD: &str = "65536";

fn main() -> ExitCode {
    let opts = Options::parse();
    let outcome = if opts.child {
        match opts.policies().as_slice() {
            [policy] => train::run(&opts, *policy),
            _ => Err("--child trains exactly one policy".into()),
        }
    } else {
        parent(&opts)
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("train_gpt: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn parent(opts: &Options) -> Result<(), String> {
    let cfg = opts.model_config();
    if opts.list_regions {
        return list_regions(opts);
    }
    let corpus = corpus::Corpus::load();
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| format!("cannot create {}: {e}", opts.out.display()))?;
    let threshold = std::env::var("MALLOC_MMAP_THRESHOLD_").ok();
    println!(
        "train_gpt: the reference model, {} config (D={} H={} T={} B={} L={}), {} steps of \
         AdamW (lr {}) per policy, seed {}, {} thread(s), forward in {}\n\
         corpus: this repository's text, {} bytes for training, {} held out for validation",
        opts.config_name(),
        cfg.d,
        cfg.h,
        cfg.t,
        cfg.b,
        cfg.l,
        opts.steps,
        opts.lr,
        opts.seed,
        opts.threads,
        opts.autocast.precision(opts.device),
        corpus.train.len(),
        corpus.val.len()
    );
    let ranks = ranks::Ranks::of(opts)?;
    if let Some(line) = ranks.describe(opts.fsdp) {
        println!("{line}");
    }
    let policies = opts.policies();
    if policies.contains(&ModelPolicy::Auto) && !opts.has_table() {
        opts.budget()?;
    }
    // The planned run first: a budget below the least possible fails
    // before the other runs spend their time.
    let mut order = policies.clone();
    order.sort_by_key(|&p| p != ModelPolicy::Auto);
    let mut results = Vec::new();
    let mut per_rank = Vec::new();
    for (i, &policy) in order.iter().enumerate() {
        eprintln!(
            "[{}/{}] {}: training in a process of its own{}",
            i + 1,
            order.len(),
            policy_name(policy),
            if ranks == ranks::Ranks::One {
                ""
            } else {
                " per rank"
            }
        );
        if ranks == ranks::Ranks::One {
            results.push(run_child(opts, policy, threshold.as_deref())?);
        } else {
            let base = || child_command(threshold.as_deref());
            let runs = ranks::run_policy(opts, &ranks, policy, &base)?;
            // The table's row: the first rank here (rank 0 on its machine);
            // its logged losses are the ranks' mean.
            results.push(runs[0].1.clone());
            per_rank.push((policy, runs));
        }
    }
    per_rank.sort_by_key(|(p, _)| policies.iter().position(|q| q == p));
    results.sort_by_key(|r| policies.iter().position(|&p| p == r.policy));

    let table = table::table(&results);
    let summary = opts.out.join("summary.tsv");
    std::fs::write(&summary, table::summary(&results))
        .map_err(|e| format!("cannot write {}: {e}", summary.display()))?;
    let rss_note = format!(
        "peak resident: VmHWM of each policy's own process (MALLOC_MMAP_THRESHOLD_={}), \
         libtorch itself included",
        threshold.as_deref().unwrap_or(MMAP_THRESHOLD)
    );
    println!(
        "\n{table}\nlosses: mean over {} fixed batch(es) of each split at the last step; \
         saved for backward: remat's report after the first batch's forward \
         (checkpoints plus saves outside them, checkpoint inputs included)\n{rss_note}",
        train::eval_batches(cfg)
    );
    let rank_table = (!per_rank.is_empty()).then(|| ranks::table(&per_rank));
    if let Some(t) = &rank_table {
        let what = if opts.fsdp {
            "communication (time some gather or reduce-scatter was in flight in c10d, over step \
             time); a rank's shards of the parameters, their gradients and AdamW's moments; the \
             most parameters gathered at once in backward; gathers of the last step issued ahead \
             of their unit"
        } else {
            "communication (time some bucket's all-reduce was in flight in c10d, over step time)"
        };
        println!("\nper rank: peak resident (VmHWM), median step, {what}\n{t}");
    }
    let planned = match results.iter().find(|r| r.policy == ModelPolicy::Auto) {
        Some(_) if opts.has_table() => {
            println!("\nauto: trained under the policy table of the command line");
            if let Some(table) = policy_table::from_options(opts)? {
                for rule in table.rules() {
                    println!("  {rule}");
                }
            }
            None
        }
        Some(r) => Some(plan_report(opts, r, &results)?),
        None => None,
    };
    let agreement = table::losses_agree(&results, opts.steps);
    match &agreement {
        Ok(s) => println!("{s}"),
        Err(s) => println!("NOT EQUAL: {s}"),
    }
    let flat = table::memory_flat(&results);
    match &flat {
        Ok(s) => println!("{s}"),
        Err(s) => println!("NOT FLAT: {s}"),
    }

    for policy in [ModelPolicy::Selective, ModelPolicy::SaveMlp] {
        if policies.contains(&policy) {
            let report =
                block_report::block_report(cfg, opts.seed, policy, opts.autocast, opts.device)?;
            println!(
                "\nwhat one block keeps under {}:\n{report}",
                policy_name(policy)
            );
        }
    }

    let title = format!(
        "reference model, {} config, {} steps, seed {}, {}",
        opts.config_name(),
        opts.steps,
        opts.seed,
        opts.autocast.precision(opts.device)
    );
    let memory = opts.out.join("memory_time.svg");
    let losses = opts.out.join("loss.svg");
    let table_path = opts.out.join("table.txt");
    plot::memory_and_time(&memory, &results, &title)?;
    plot::losses(&losses, &results, &title)?;
    let rank_note = rank_table
        .map(|t| format!("\nper rank:\n{t}"))
        .unwrap_or_default();
    std::fs::write(
        &table_path,
        format!("{title}\n\n{table}\n{rss_note}\n{rank_note}"),
    )
    .map_err(|e| format!("cannot write {}: {e}", table_path.display()))?;
    println!("\nplots: {}\n       {}", memory.display(), losses.display());
    println!("table: {}", table_path.display());
    match agreement.and(flat).and(planned.unwrap_or(Ok(()))) {
        Err(s) if opts.check => Err(format!("--check: {s}")),
        _ => Ok(()),
    }
}

/// `--list-regions`: the model's checkpoints and regions under
/// `ModelPolicy::Auto` on the first batch, at the run's precision.
fn list_regions(opts: &Options) -> Result<(), String> {
    tch::set_num_threads(opts.threads);
    let cfg = opts.model_config();
    let model = remat_reference::model::Model::on(cfg, opts.seed as i64, opts.device);
    let corpus = corpus::Corpus::load();
    let (x, y) = corpus::Sampler::new(opts.seed).batch_on(&corpus.train, cfg, opts.device);
    let list = policy_table::list(|| {
        opts.autocast
            .scope(opts.device, || model.loss(&x, &y, ModelPolicy::Auto))
    })?;
    println!(
        "the {} config's checkpoints and regions (the `auto` blocks; `kept if saved`: bytes at \
         the forward→backward point with every `auto` region saved):\n{list}",
        opts.config_name()
    );
    Ok(())
}

/// Prints the planned run's plan (read back from `plan.json`) and its
/// predicted against measured bytes and time; `Err` inside when a
/// predicted count (the planner's, or the table's) is not the measured one.
fn plan_report(
    opts: &Options,
    auto: &protocol::RunResult,
    results: &[protocol::RunResult],
) -> Result<Result<(), String>, String> {
    let path = opts.out.join("plan.json");
    let plan = remat::planner::Plan::load(&path)
        .map_err(|e| format!("cannot read the plan back from {}: {e}", path.display()))?;
    let numbers = auto.plan.ok_or("the auto run reported no plan numbers")?;
    let none = results
        .iter()
        .find(|r| r.policy == ModelPolicy::None)
        .map(protocol::RunResult::median_step_ns);
    println!(
        "\nauto: {plan}auto: plan written to {}\n{}",
        path.display(),
        budget::report(&numbers, auto.median_step_ns(), none, auto.saved_total)
    );
    Ok(if numbers.predicted_kept != numbers.measured_kept {
        Err(format!(
            "the plan predicted {} bytes kept, the forward under it kept {}",
            numbers.predicted_kept, numbers.measured_kept
        ))
    } else if numbers.measured_kept != auto.saved_total {
        Err(format!(
            "the planner measured {} bytes saved for backward, the table's count is {}",
            numbers.measured_kept, auto.saved_total
        ))
    } else {
        Ok(())
    })
}

/// This program, to run as a child (arguments to come), with the malloc
/// setting every child's peak resident memory is measured under.
fn child_command(threshold: Option<&str>) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut cmd = Command::new(exe);
    if threshold.is_none() {
        cmd.env("MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD);
    }
    Ok(cmd)
}

/// Trains `policy` in a fresh process of this program and reads its report.
fn run_child(
    opts: &Options,
    policy: ModelPolicy,
    threshold: Option<&str>,
) -> Result<protocol::RunResult, String> {
    let mut cmd = child_command(threshold)?;
    cmd.args(opts.child_args(policy))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    let output = cmd
        .output()
        .map_err(|e| format!("cannot start the {} run: {e}", policy_name(policy)))?;
    if !output.status.success() {
        return Err(format!(
            "the {} run failed ({})",
            policy_name(policy),
            output.status
        ));
    }
    protocol::parse(policy, &String::from_utf8_lossy(&output.stdout))
}
