//! `cargo xtask bench`: the reference model's step time and memory under
//! each policy, and the runtime's per-region overhead, side by side with the
//! Python peers (`torch_remat` 0.2.0 and `torch.utils.checkpoint`) on the
//! same model, data, libtorch and thread count; writes docs/performance.md.
//!
//! Every measurement runs in rounds: each round runs every variant once
//! (Rust in this process, Python in a long-lived worker process driven over
//! a pipe), so slow drift of a shared machine hits all variants alike, and
//! ratios are taken within a round before their median is taken.
//!
//! Subcommands (the xtask passes `run`; the others are its children):
//! - `run [--quick] --out FILE --python PY --script peers.py --command TEXT`
//! - `rss <policy> <config> <steps>`: the memory child (one JSON line)
//! - `chain <rounds>`: only the per-region chain, one line per round
//! - `steps <config> <rounds> --python PY --script peers.py`: only section
//!   1's table for one config, at `--threads`, on stdout
//! - `planner [--quick] [--config small|medium] --out FILE`: only section 4
//!   (the planner), as markdown in FILE, with its plot beside it; `--config`
//!   is the config of the hand-policy comparison (medium by default)
//! - `peak [--quick] --docs FILE`: the planner's peak contract over its
//!   model shapes, written into FILE (docs/planner.md) between its markers
//! - `extras <rounds> <reps>`: where each hand policy's extra step time
//!   over `none` goes on the medium config (forward, backward page faults,
//!   against the time model's prediction), as a markdown table
//!
//! The timed subcommands (all but `rss`) restart themselves with glibc's
//! allocator pinned (`allocator`; `REMAT_BENCH_PINNED=1` keeps the
//! environment's settings).
//!
//! Every subcommand takes `--threads N` (default 1): libtorch's intra-op
//! threads on both sides (the Python worker reads `REMAT_BENCH_THREADS`),
//! and `--device cpu|cuda|cuda:N` (default cpu): where the Rust side's
//! model and chain run (the GPU kit runs `--device cuda chain`; the
//! Python peers stay on the CPU, so `run` refuses another device).

mod accuracy;
mod allocator;
mod extras;
mod pareto;
mod peak;
mod planner;
mod planner_report;
mod python;
mod replay_cost;
mod report;
mod rust_side;
mod stats;
mod variant;

use python::Peers;
use remat_reference::model::{Config, ModelPolicy, Setup, DEEP, MEDIUM, POLICIES, SMALL};
use report::{Machine, Results};
use std::path::PathBuf;
use std::process::Command;

pub fn config_by_name(name: &str) -> Option<Config> {
    match name {
        "small" => Some(SMALL),
        "medium" => Some(MEDIUM),
        "deep" => Some(DEEP),
        _ => None,
    }
}

/// How much of everything one run measures.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Rounds of step timing per config.
    pub step_rounds: [(&'static str, usize); 2],
    /// The intra-op thread counts of section 1 (both sides), each a table.
    pub step_threads: [i32; 2],
    pub chain_rounds: usize,
    /// Chain runs per variant and round (their median is the round's value).
    pub chain_reps: usize,
    pub deep_steps: usize,
    /// Steps of each fault child (medium; the first is not counted).
    pub fault_steps: usize,
    /// The config of the memory children (`deep`; `medium` in a quick run).
    pub memory_config: &'static str,
    /// Planner, small config: rounds over every assignment.
    pub planner_small_rounds: usize,
    /// Planner, medium config: rounds over hand policies and plans.
    pub planner_medium_rounds: usize,
    /// Planner, medium config: budgets in the sweep.
    pub planner_budgets: usize,
    /// Planner, medium config: rounds of the hand policies alone, for the
    /// time model's check (predicted against measured).
    pub accuracy_rounds: usize,
    /// Timing runs of each planner profile (`profile_with`).
    pub profile_runs: usize,
    /// Rounds of section 5 (where recomputation's time goes).
    pub replay_rounds: usize,
}

const FULL: Plan = Plan {
    step_rounds: [("small", 21), ("medium", 11)],
    step_threads: [1, 2],
    chain_rounds: 15,
    chain_reps: 9,
    deep_steps: 5,
    fault_steps: 6,
    memory_config: "deep",
    planner_small_rounds: 31,
    planner_medium_rounds: 11,
    planner_budgets: 9,
    accuracy_rounds: 21,
    profile_runs: 15,
    replay_rounds: 11,
};

const QUICK: Plan = Plan {
    step_rounds: [("small", 3), ("medium", 1)],
    step_threads: [1, 2],
    chain_rounds: 3,
    chain_reps: 3,
    deep_steps: 1,
    fault_steps: 2,
    memory_config: "medium",
    planner_small_rounds: 2,
    planner_medium_rounds: 1,
    planner_budgets: 3,
    accuracy_rounds: 1,
    profile_runs: 3,
    replay_rounds: 1,
};

static THREADS: std::sync::OnceLock<i32> = std::sync::OnceLock::new();

/// libtorch's intra-op threads for this run (`--threads`, default 1); the
/// memory children and the Python worker get it as `REMAT_BENCH_THREADS`.
pub fn threads() -> i32 {
    *THREADS.get_or_init(|| 1)
}

/// Takes `--threads N` out of `args`.
fn take_threads(args: &mut Vec<String>) -> Result<(), String> {
    let mut n = 1;
    if let Some(i) = args.iter().position(|a| a == "--threads") {
        n = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .filter(|&n| n > 0)
            .ok_or("--threads needs a positive number")?;
        args.drain(i..i + 2);
    }
    THREADS.set(n).map_err(|_| "threads set twice".to_string())
}

static DEVICE: std::sync::OnceLock<tch::Device> = std::sync::OnceLock::new();

/// Where the Rust side runs (`--device`, default the CPU).
pub fn device() -> tch::Device {
    *DEVICE.get_or_init(|| tch::Device::Cpu)
}

/// Takes `--device D` out of `args`, checked against the machine.
fn take_device(args: &mut Vec<String>) -> Result<(), String> {
    let mut device = tch::Device::Cpu;
    if let Some(i) = args.iter().position(|a| a == "--device") {
        let text = args
            .get(i + 1)
            .ok_or("--device needs cpu, cuda or cuda:N")?;
        device = remat::diagnostics::device::parse(text).map_err(|e| e.to_string())?;
        args.drain(i..i + 2);
    }
    DEVICE
        .set(device)
        .map_err(|_| "device set twice".to_string())
}

fn main() {
    // `cargo bench` appends `--bench`.
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if let Err(e) = take_threads(&mut args).and_then(|_| take_device(&mut args)) {
        eprintln!("bench: error: {e}");
        std::process::exit(1);
    }
    // Every subcommand times steps but `rss`, a child its parent sets up.
    if !matches!(args.first().map(String::as_str), None | Some("rss")) {
        allocator::ensure_pinned();
    }
    tch::set_num_threads(threads());
    let result = match args.first().map(String::as_str) {
        Some("run") if device() != tch::Device::Cpu => {
            Err("run compares with the Python peers on the CPU: use --device only with chain, rss or planner".into())
        }
        Some("run") => run(&args[1..]),
        Some("rss") => rss(&args[1..]),
        Some("chain") => chain_only(&args[1..]),
        Some("planner") => planner_only(&args[1..]),
        Some("steps") => steps_only(&args[1..]),
        Some("extras") => extras::extras(&args[1..]),
        Some("replay") => replay_only(&args[1..]),
        Some("peak") => peak::peak(&args[1..]),
        // `cargo test --all-targets` runs every bench without arguments:
        // the benchmark is `cargo xtask bench`'s, not the test suite's.
        None => {
            println!("perf: run by `cargo xtask bench` (nothing to do without arguments)");
            Ok(())
        }
        _ => Err("usage: perf [--threads N] [--device D] run [--quick] --out FILE --python PY --script FILE --command TEXT | rss <policy> <config> <steps> | chain <rounds> | steps <config> <rounds> --python PY --script FILE | replay <rounds> --python PY --script FILE | planner [--quick] [--config small|medium] --out FILE | peak [--quick] --docs FILE".into()),
    };
    if let Err(e) = result {
        eprintln!("bench: error: {e}");
        std::process::exit(1);
    }
}

/// This bench as a memory child (`rss`) at this run's thread count.
fn rss_command(exe: &std::path::Path, policy: &str, config: &str, steps: usize) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["rss", policy, config, &steps.to_string()])
        .args(["--threads", &threads().to_string()]);
    cmd
}

fn rss(args: &[String]) -> Result<(), String> {
    let [policy, config, steps] = args else {
        return Err("rss <policy> <config> <steps>".into());
    };
    let policy = rust_side::policy_by_name(policy).ok_or("unknown policy")?;
    let cfg = config_by_name(config).ok_or("unknown config")?;
    let steps = steps.parse().map_err(|_| "steps must be a number")?;
    rust_side::rss_child(cfg, policy, steps);
    Ok(())
}

fn chain_only(args: &[String]) -> Result<(), String> {
    let rounds: usize = args.first().and_then(|r| r.parse().ok()).unwrap_or(10);
    for _ in 0..rounds {
        let (f, fb) = rust_chain_round(FULL.chain_reps);
        println!(
            "per region: {:.3} us forward, {:.3} us forward+backward",
            f * 1e6,
            fb * 1e6
        );
    }
    Ok(())
}

/// Only section 5 (where recomputation's time goes), printed.
fn replay_only(args: &[String]) -> Result<(), String> {
    let usage = "replay <rounds> --python PY --script FILE";
    let [rounds, rest @ ..] = args else {
        return Err(usage.into());
    };
    let rounds: usize = rounds.parse().map_err(|_| usage)?;
    let mut worker = flags(rest)
        .and_then(|mut f| f.peers())
        .map_err(|e| format!("{e}: {usage}"))?
        .worker()?;
    let text = replay_cost::section(rounds, &mut worker)?;
    worker.quit();
    println!("{text}");
    Ok(())
}

/// Only section 1, for one config at `--threads`, printed as its table: the
/// quick way to measure one change of the runtime against the peers.
fn steps_only(args: &[String]) -> Result<(), String> {
    let usage = "steps <small|medium> <rounds> --python PY --script FILE";
    let [config, rounds, rest @ ..] = args else {
        return Err(usage.into());
    };
    let config = match config.as_str() {
        "small" => "small",
        "medium" => "medium",
        _ => return Err(usage.into()),
    };
    let rounds: usize = rounds.parse().map_err(|_| usage)?;
    let mut worker = flags(rest)
        .and_then(|mut f| f.peers())
        .map_err(|e| format!("{e}: {usage}"))?
        .worker()?;
    let mut results = Results::new(FULL);
    let started = std::time::Instant::now();
    step_section(
        &[(config, rounds)],
        threads(),
        &mut worker,
        &mut results,
        started,
    )?;
    worker.quit();
    let mut text = String::new();
    report::render_steps(&mut text, &results, config, threads(), rounds);
    println!("{text}");
    Ok(())
}

fn planner_only(args: &[String]) -> Result<(), String> {
    let quick = args.iter().any(|a| a == "--quick");
    let out = args
        .iter()
        .skip_while(|a| *a != "--out")
        .nth(1)
        .ok_or("planner needs --out FILE")?;
    let config = match args.iter().skip_while(|a| *a != "--config").nth(1) {
        None => "medium",
        Some(c) if c == "small" => "small",
        Some(c) if c == "medium" => "medium",
        Some(c) => return Err(format!("--config takes small or medium, not {c}")),
    };
    let plan = if quick { QUICK } else { FULL };
    // Checked before the minutes of measuring, not when the plot is written.
    let folder = std::path::Path::new(out)
        .parent()
        .filter(|p| !p.as_os_str().is_empty());
    if let Some(folder) = folder.filter(|p| !p.is_dir()) {
        return Err(format!(
            "--out {out}: the folder {} does not exist (the file and the Pareto plot beside \
             it go there); create it first",
            folder.display()
        ));
    }
    let mut text = String::new();
    planner_section(&plan, config, std::path::Path::new(out), &mut text)?;
    std::fs::write(out, text).map_err(|e| format!("cannot write {out}: {e}"))
}

/// Whether `plan` is the quick one (the peak contract leaves the deep
/// config out).
fn quick_plan(plan: &Plan) -> bool {
    plan.deep_steps == QUICK.deep_steps
}

/// Section 4: measures the planner on the small config (every assignment)
/// and on `config` (hand policies, plans, three profiles, predicted against
/// measured), draws the Pareto plot next to `out` and appends the markdown
/// to `text`.
fn planner_section(
    plan: &Plan,
    config: &'static str,
    out: &std::path::Path,
    text: &mut String,
) -> Result<(), String> {
    let small = planner::small_check("small", SMALL, plan.planner_small_rounds, plan.profile_runs)?;
    let (cfg, rounds) = match config {
        "small" => (SMALL, plan.planner_small_rounds),
        _ => (MEDIUM, plan.planner_medium_rounds),
    };
    let frontier = planner::frontier(
        config,
        cfg,
        planner::Rounds {
            frontier: rounds,
            accuracy: plan.accuracy_rounds,
        },
        plan.planner_budgets,
        plan.profile_runs,
    )?;
    let svg = out.with_file_name("pareto.svg");
    pareto::draw(&svg, &frontier)?;
    eprintln!("bench: Pareto plot written to {}", svg.display());
    planner_report::render(text, &small, &frontier, "pareto.svg");
    Ok(())
}

/// One round of the Rust chain: per-region seconds, forward and
/// forward+backward (each variant's value is the least of `reps` runs).
fn rust_chain_round(reps: usize) -> (f64, f64) {
    let mut per = [0.0; 2];
    for (k, backward) in [false, true].into_iter().enumerate() {
        let Ok([plain, regions]) = alternate(reps, |regions| {
            Ok::<_, std::convert::Infallible>(rust_side::chain(regions, backward))
        });
        per[k] = (least(&regions) - least(&plain)) / rust_side::CHAIN as f64;
        if std::env::var_os("PERF_CHAIN_RAW").is_some() {
            eprintln!("backward={backward}: plain {:?}", plain);
            eprintln!("backward={backward}: regions {:?}", regions);
        }
    }
    (per[0], per[1])
}

/// The chain without and with regions, `reps` times each, alternating run
/// by run so that whatever slows a stretch of runs (the other process, the
/// scheduler moving this one) hits both alike: every run's seconds, as
/// `[without, with]`.
fn alternate<E>(
    reps: usize,
    mut run: impl FnMut(bool) -> Result<f64, E>,
) -> Result<[Vec<f64>; 2], E> {
    let mut v = [Vec::new(), Vec::new()];
    for _ in 0..reps {
        for regions in [false, true] {
            v[usize::from(regions)].push(run(regions)?);
        }
    }
    Ok(v)
}

/// The least of repeated runs: on a shared machine a run is only ever
/// slowed down (preemption), so the least is the best estimate of its cost.
fn least(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

struct Options {
    quick: bool,
    out: PathBuf,
    peers: Peers,
    command: String,
}

/// The flags `run` and `steps` take, each optional here.
#[derive(Default)]
struct Flags {
    quick: bool,
    out: Option<PathBuf>,
    python: Option<PathBuf>,
    script: Option<PathBuf>,
    command: Option<String>,
}

fn flags(args: &[String]) -> Result<Flags, String> {
    let mut f = Flags::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--quick" => f.quick = true,
            "--out" => f.out = Some(PathBuf::from(value()?)),
            "--python" => f.python = Some(PathBuf::from(value()?)),
            "--script" => f.script = Some(PathBuf::from(value()?)),
            "--command" => f.command = Some(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(f)
}

impl Flags {
    fn peers(&mut self) -> Result<Peers, String> {
        Ok(Peers {
            python: self.python.take().ok_or("--python is required")?,
            script: self.script.take().ok_or("--script is required")?,
        })
    }
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut f = flags(args)?;
    Ok(Options {
        quick: f.quick,
        out: f.out.take().ok_or("--out is required")?,
        peers: f.peers()?,
        command: f
            .command
            .take()
            .unwrap_or_else(|| "cargo xtask bench".into()),
    })
}

/// The step variants of one round: (implementation, policy).
pub const IMPLS: [&str; 3] = ["remat", "torch_remat", "torch"];

/// The pause at each switch between the Rust process and the Python one.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// Section 1 at `t` intra-op threads: every variant once per round, the
/// order rotating, a first untimed round.
fn step_section(
    configs: &[(&'static str, usize)],
    t: i32,
    worker: &mut python::Worker,
    results: &mut Results,
    started: std::time::Instant,
) -> Result<(), String> {
    for &(config, rounds) in configs {
        let setup = Setup::on(config_by_name(config).expect("known"), device());
        // Warm-up: one step of every variant (allocator, lazy init), untimed.
        for round in 0..=rounds {
            let mut variants: Vec<(&str, ModelPolicy)> = Vec::new();
            for imp in IMPLS {
                for p in POLICIES {
                    if !(imp == "torch_remat" && p == ModelPolicy::None) {
                        variants.push((imp, p));
                    }
                }
            }
            // Rotate the order each round so no variant always goes first.
            let n = variants.len();
            variants.rotate_left(round % n);
            let mut last_side = None;
            for (imp, p) in variants {
                let name = rust_side::policy_name(p);
                let (secs, loss) = timed_on_side(&mut last_side, imp == "remat", || match imp {
                    "remat" => Ok(rust_side::step(&setup, p)),
                    _ => worker.step(config, imp, name),
                })?;
                if round > 0 {
                    results.step(config, t, imp, name, secs, loss);
                }
            }
            eprintln!(
                "bench: step time, {config}, {t} thread(s), round {round}/{rounds} ({:.0} s so far)",
                started.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}

/// One timed run of an interleaved round, on the Rust side or the Python
/// worker's. The process that ran last keeps its intra-op threads spinning
/// for a while after its step; with as many threads as cores, the first
/// steps of the other process would share the cores with them
/// (docs/performance.md, section 6), so each switch of side pauses to let
/// them park. That process has also filled the caches with its own memory,
/// so the first run after a switch runs cold; in a cyclic order the same
/// variant would always pay for it (remat's `none`, after the Python
/// `save_mlp`), so that run is made once untimed first, as is a round's
/// first (the round before may have ended on either side).
pub(crate) fn timed_on_side<T>(
    last_side: &mut Option<bool>,
    side: bool,
    mut run: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    if *last_side != Some(side) {
        if last_side.is_some() {
            std::thread::sleep(SETTLE);
        }
        run()?;
    }
    *last_side = Some(side);
    run()
}

/// Section 3: the per-region chain, both sides alternating run by run.
/// Run first, on both processes' fresh heaps: after the model's steps the
/// same region costs about a fifth more (docs/performance.md, section 6),
/// an effect of the heap they leave, not of the region path, and of a
/// size that would depend on what ran before.
fn chain_section(
    plan: &Plan,
    worker: &mut python::Worker,
    results: &mut Results,
) -> Result<(), String> {
    tch::set_num_threads(threads());
    worker.threads(threads())?;
    for round in 0..=plan.chain_rounds {
        for backward in [false, true] {
            for imp in IMPLS {
                let v = alternate(plan.chain_reps, |regions| match imp {
                    "remat" => Ok(rust_side::chain(regions, backward)),
                    _ => worker.chain(imp, regions, backward),
                })?;
                if round > 0 {
                    for regions in [false, true] {
                        results.chain(imp, regions, backward, least(&v[usize::from(regions)]));
                    }
                }
            }
        }
    }
    Ok(())
}

fn run(args: &[String]) -> Result<(), String> {
    let opts = parse(args)?;
    let plan = if opts.quick { QUICK } else { FULL };
    let started = std::time::Instant::now();
    let mut worker = opts.peers.worker()?;
    let hello = worker.ask(serde_json::json!({"cmd": "hello"}))?;
    let machine = Machine::collect(&hello);
    eprintln!("bench: {plan:?}");
    let mut results = Results::new(plan);

    // 3. The per-region chain, first (see `chain_section`).
    chain_section(&plan, &mut worker, &mut results)?;

    // 1. Step time, interleaved round by round, at each thread count.
    for t in plan.step_threads {
        tch::set_num_threads(t);
        worker.threads(t)?;
        step_section(&plan.step_rounds, t, &mut worker, &mut results, started)?;
    }
    tch::set_num_threads(threads());
    worker.threads(threads())?;

    // 2. Bytes saved for backward (medium), then the memory children (deep).
    {
        let setup = Setup::on(MEDIUM, device());
        for p in POLICIES {
            let name = rust_side::policy_name(p);
            results.bytes("remat", name, rust_side::saved_bytes(&setup, p));
            for imp in ["torch_remat", "torch"] {
                if p == ModelPolicy::None && imp == "torch_remat" {
                    continue;
                }
                results.bytes(imp, name, worker.bytes("medium", imp, name)?);
            }
        }
    }
    // The memory children: remat under each policy, two at a time (each is
    // single-threaded; resident sizes do not depend on timing).
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    for pair in POLICIES.chunks(2) {
        eprintln!(
            "bench: memory children {:?} ({:.0} s so far)",
            pair.iter()
                .map(|p| rust_side::policy_name(*p))
                .collect::<Vec<_>>(),
            started.elapsed().as_secs_f64()
        );
        let children: Vec<_> = pair
            .iter()
            .map(|p| {
                let name = rust_side::policy_name(*p);
                let mut cmd = rss_command(&exe, name, plan.memory_config, plan.deep_steps);
                allocator::setting(&mut cmd, false)
                    .env("MALLOC_MMAP_THRESHOLD_", "65536")
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .map(|c| (name, c))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?;
        for (name, child) in children {
            let out = child.wait_with_output().map_err(|e| e.to_string())?;
            let value = python::last_json(out, &format!("memory child {name}"))?;
            results.rss(
                "remat",
                name,
                python::num(&value, "hwm")? as i64,
                python::num(&value, "forward_growth")? as i64,
            );
        }
    }

    // Page faults and time per step, one fresh process per implementation,
    // policy and allocator setting, one after another (so that they do not
    // share the cores): each policy's steady state in a process of its own.
    for pinned in [false, true] {
        for p in POLICIES {
            let name = rust_side::policy_name(p);
            eprintln!(
                "bench: fault children, {name}, allocator {} ({:.0} s so far)",
                if pinned { "pinned" } else { "defaults" },
                started.elapsed().as_secs_f64()
            );
            let steps = plan.fault_steps;
            let out = allocator::setting(&mut rss_command(&exe, name, "medium", steps), pinned)
                .output()
                .map_err(|e| e.to_string())?;
            let rust = python::last_json(out, &format!("fault child {name}"))?;
            let py = opts.peers.child("torch", name, "medium", steps, pinned)?;
            for (imp, v) in [("remat", rust), ("torch", py)] {
                results.faults(
                    (imp, name, pinned),
                    python::num(&v, "faults_per_step")?,
                    python::num(&v, "secs_per_step")?,
                );
            }
        }
    }

    // 5. Where recomputation's time goes (medium, one thread).
    let section5 = replay_cost::section(plan.replay_rounds, &mut worker)?;

    worker.quit();

    // 4. The planner (Rust only), and its peak contract in docs/planner.md.
    let mut section4 = String::new();
    planner_section(&plan, "medium", &opts.out, &mut section4)?;
    peak::write_section(
        &opts.out.with_file_name("planner.md"),
        quick_plan(&plan),
        &opts.command,
    )?;

    let elapsed = started.elapsed().as_secs_f64();
    let old = std::fs::read_to_string(&opts.out).unwrap_or_default();
    let mut text =
        report::render(&results, &machine, &opts.command, elapsed) + &section4 + &section5;
    let kept = report::kept_tail(&old);
    if !kept.is_empty() {
        text = format!("{}\n\n{kept}", text.trim_end());
    }
    std::fs::write(&opts.out, text)
        .map_err(|e| format!("cannot write {}: {e}", opts.out.display()))?;
    eprintln!("bench: wrote {} in {elapsed:.0} s", opts.out.display());
    Ok(())
}
