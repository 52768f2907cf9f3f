//! Collected numbers and the markdown of docs/performance.md.

use crate::stats::{ratios, summary, Summary};
use crate::{Plan, IMPLS};
use remat_reference::numbers::mib;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::process::Command;

/// The machine and software the numbers come from.
pub struct Machine {
    pub cpu: String,
    pub nproc: String,
    pub rustc: String,
    pub torch: String,
    pub torch_remat: String,
    pub python: String,
}

impl Machine {
    pub fn collect(hello: &serde_json::Value) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            .unwrap_or_else(|| "unknown".into());
        let run = |cmd: &str, args: &[&str]| {
            Command::new(cmd)
                .args(args)
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_else(|| "unknown".into())
        };
        let field = |k: &str| {
            hello
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("not installed")
                .to_string()
        };
        Machine {
            cpu,
            nproc: run("nproc", &[]),
            rustc: run("rustc", &["-V"]),
            torch: field("torch"),
            torch_remat: field("torch_remat"),
            python: field("python"),
        }
    }
}

/// The line after which docs/performance.md is written by hand (what a
/// profile found, with the commands that reproduce it): a regeneration
/// keeps it and everything after it.
pub const KEPT: &str =
    "<!-- Written by hand below this line: `cargo xtask bench` keeps it when it rewrites the file. -->";

/// The hand-written end of an earlier file (from [`KEPT`] on), if any.
pub fn kept_tail(old: &str) -> &str {
    old.find(KEPT).map_or("", |i| &old[i..])
}

/// (config, threads, impl, policy).
type Key = (String, i32, String, String);

pub struct Results {
    plan: Plan,
    /// (config, threads, impl, policy) -> seconds per round.
    steps: BTreeMap<Key, Vec<f64>>,
    losses: BTreeMap<Key, f64>,
    /// (impl, policy) -> bytes.
    bytes: BTreeMap<(String, String), i64>,
    /// (impl, policy) -> (VmHWM, growth of VmRSS over the first forward).
    rss: BTreeMap<(String, String), (i64, i64)>,
    /// (impl, policy, allocator pinned) -> (minor page faults, seconds)
    /// per step.
    faults: BTreeMap<(String, String, bool), (f64, f64)>,
    /// (impl, regions, backward) -> seconds per round.
    chain: BTreeMap<(String, bool, bool), Vec<f64>>,
}

impl Results {
    pub fn new(plan: Plan) -> Results {
        Results {
            plan,
            steps: BTreeMap::new(),
            losses: BTreeMap::new(),
            bytes: BTreeMap::new(),
            rss: BTreeMap::new(),
            faults: BTreeMap::new(),
            chain: BTreeMap::new(),
        }
    }

    pub fn step(&mut self, config: &str, t: i32, imp: &str, policy: &str, secs: f64, loss: f64) {
        let key = (config.to_string(), t, imp.to_string(), policy.to_string());
        self.losses.insert(key.clone(), loss);
        self.steps.entry(key).or_default().push(secs);
    }

    pub fn bytes(&mut self, imp: &str, policy: &str, bytes: i64) {
        self.bytes.insert((imp.into(), policy.into()), bytes);
    }

    pub fn rss(&mut self, imp: &str, policy: &str, hwm: i64, growth: i64) {
        self.rss.insert((imp.into(), policy.into()), (hwm, growth));
    }

    /// One fault child's (faults, seconds) per step, by (impl, policy,
    /// whether the allocator was pinned).
    pub fn faults(&mut self, (imp, policy, pinned): (&str, &str, bool), faults: f64, secs: f64) {
        self.faults
            .insert((imp.into(), policy.into(), pinned), (faults, secs));
    }

    pub fn chain(&mut self, imp: &str, regions: bool, backward: bool, secs: f64) {
        self.chain
            .entry((imp.into(), regions, backward))
            .or_default()
            .push(secs);
    }

    fn steps_of(&self, config: &str, t: i32, imp: &str, policy: &str) -> Option<&Vec<f64>> {
        // Eager torch is the `none` of both Python peers.
        let imp = if policy == "none" && imp == "torch_remat" {
            "torch"
        } else {
            imp
        };
        self.steps
            .get(&(config.to_string(), t, imp.to_string(), policy.to_string()))
    }

    /// Per-region seconds of one implementation, per round.
    pub fn per_region(&self, imp: &str, backward: bool) -> Vec<f64> {
        let get = |regions| self.chain.get(&(imp.to_string(), regions, backward));
        match (get(true), get(false)) {
            (Some(r), Some(p)) => r
                .iter()
                .zip(p)
                .map(|(r, p)| (r - p) / crate::rust_side::CHAIN as f64)
                .collect(),
            _ => Vec::new(),
        }
    }
}

const POLICY_NAMES: [&str; 4] = ["none", "full", "selective", "save_mlp"];

fn label(imp: &str) -> &'static str {
    match imp {
        "remat" => "remat (Rust)",
        "torch_remat" => "torch_remat 0.2.0",
        _ => "torch.utils.checkpoint",
    }
}

fn ms(s: Summary) -> String {
    ms_with(s, 1)
}

/// Seconds as milliseconds with `digits` decimals: median (quartiles).
pub fn ms_with(s: Summary, digits: usize) -> String {
    format!(
        "{:.digits$} ms ({:.digits$}–{:.digits$})",
        s.median * 1e3,
        s.q1 * 1e3,
        s.q3 * 1e3
    )
}

fn us(s: Summary) -> String {
    format!(
        "{:.2} µs ({:.2}–{:.2})",
        s.median * 1e6,
        s.q1 * 1e6,
        s.q3 * 1e6
    )
}

fn ratio(s: Summary) -> String {
    format!("{:.2}× ({:.2}–{:.2})", s.median, s.q1, s.q3)
}

pub fn render(r: &Results, m: &Machine, command: &str, elapsed: f64) -> String {
    let mut o = String::new();
    let p = r.plan;
    let _ = writeln!(
        o,
        "# Performance\n\n\
         Written by `{command}` (benches/perf, bench/python/peers.py) in one run of \
         {:.0} minutes. Regenerate it with `cargo xtask bench` (about 30 minutes on a 2-core \
         machine; `cargo xtask bench --quick` for a smoke run whose numbers mean little).\n",
        elapsed / 60.0
    );
    let _ = writeln!(o, "## Machine\n");
    let _ = writeln!(o, "| | |\n| --- | --- |");
    let _ = writeln!(o, "| CPU | {} |", m.cpu);
    let _ = writeln!(o, "| nproc | {} |", m.nproc);
    let _ = writeln!(o, "| rustc | {} |", m.rustc);
    let _ = writeln!(
        o,
        "| libtorch | the PyPI wheel torch {} (tch 0.26), both sides |",
        m.torch
    );
    let _ = writeln!(o, "| Python | {} |", m.python);
    let _ = writeln!(o, "| torch_remat | {} |", m.torch_remat);
    let _ = writeln!(
        o,
        "| threads | section 1 at {:?} intra-op threads, the rest at {t}, on both sides (`tch::set_num_threads`, `torch.set_num_threads`; `--threads`) |",
        p.step_threads,
        t = crate::threads()
    );
    let _ = writeln!(
        o,
        "| plan | step rounds {:?}, chain rounds {} × {} runs, deep memory children {} steps |\n",
        p.step_rounds, p.chain_rounds, p.chain_reps, p.deep_steps
    );
    let _ = writeln!(
        o,
        "## How it is measured\n\n\
         One process runs the Rust variants; a long-lived Python worker \
         (`bench/python/peers.py worker`) runs the Python ones and answers one JSON command per \
         line over a pipe. The bench drives both: every round runs every variant once (the \
         order rotates from round to round, and a first round is an untimed warm-up), so the \
         drift of a shared machine hits all variants of a round alike. At each switch between \
         the two processes the bench pauses 50 ms, so that the intra-op threads of the process \
         that ran last have parked before the other one starts (section 6), and then runs the \
         next variant once untimed: the first step after a switch finds the caches full of \
         the other process's memory, and in the rotating cyclic order the same variant \
         (remat's `none`) would always be that step. Each table shows the \
         median over rounds with the interquartile range in parentheses; a ratio is taken \
         within each round first, and the table shows the median (and quartiles) of those \
         per-round ratios. Times are measured inside each process around forward + backward \
         (`loss.backward()`), after zeroing the gradients in place (on both sides, so that \
         both backwards accumulate into the same buffers); there is no optimizer \
         update.\n\n\
         Both processes run with glibc's allocator pinned ({pinned}; the bench restarts itself \
         with them, and the Python worker inherits them), except the children of section 2, \
         which set their own. With glibc's defaults, freed tensors go back to the system and \
         the next step faults them in again, as much as the step before left: in interleaved \
         rounds a variant's time then depends on which variant ran before it (a checkpointed \
         step after `none` finds a large heap), not only on its own work (section 6). \
         Pinned, every step runs on a heap that keeps what the largest step needed. Section \
         2's page-fault table shows each policy in its own process with the defaults, which \
         is what a training loop that leaves the allocator alone sees.\n\n\
         The model is the reference model (docs/reference-model.md), written op for \
         op in both languages, with the same parameters (drawn from seed 0 in the same order) \
         and the same batch (seed 1). `torch.utils.checkpoint` runs non-reentrant: `full` \
         checkpoints each block; `selective` and `save_mlp` use selective activation \
         checkpointing (`create_selective_checkpoint_contexts`) with every op of the saved part \
         (attention, or the MLP) `MUST_SAVE` and every other op `PREFER_RECOMPUTE`, the nearest \
         it has to a `Save` region. `none` is the plain eager model, the same Python run for \
         both peers.\n",
        pinned = crate::allocator::describe()
    );

    // 1. Step time.
    let _ = writeln!(o, "## 1. Step time\n");
    let tables = p
        .step_rounds
        .into_iter()
        .flat_map(|(config, rounds)| p.step_threads.map(|t| (config, t, rounds)));
    for (config, t, rounds) in tables {
        render_steps(&mut o, r, config, t, rounds);
    }

    // 2. Memory.
    let _ = writeln!(
        o,
        "## 2. Memory\n\n\
         **Bytes saved for backward** at the forward→backward point, medium config (D=256, \
         L=4), one forward each: remat's own count (`planner::measure_kept_bytes`, what the \
         training example's table and the planner use: what checkpoints keep, the inputs they \
         keep for replay, and what autograd saved outside them); torch_remat's own report \
         (`format_saved_tensors_report(roots=loss)`, its header total); for \
         `torch.utils.checkpoint` and the eager model, the unique storages that a \
         `torch.autograd.graph.saved_tensors_hooks` pack hook sees (saves outside checkpoints \
         and the checkpoints' inputs) plus the storages in the SAC caches. Parameters are not \
         counted anywhere, nor views of them (which ops such as `linear` save): the hook skips \
         every tensor whose storage is a parameter's. torch_remat's report does not count the \
         checkpoints' inputs (the block inputs, 2 MiB each, 8 MiB in all here), which remat's \
         and the hook's counts do.\n\n\
         **Peak resident memory** (remat): a fresh process per policy runs {} step(s) of the \
         `{}` config (`deep`: D=256, L=32) and reports `VmHWM` from /proc/self/status; \
         \"forward growth\" is how much `VmRSS` grew over the first forward, a measure of \
         what the forward leaves for backward that does not rely on remat's records. The \
         children run with `MALLOC_MMAP_THRESHOLD_=65536`, so that every tensor of 64 KiB or \
         more is its own mapping and goes back to the system when freed (glibc keeps smaller \
         freed memory); what is counted is resident size, not live bytes. Two children run at \
         a time. The Python peers are compared on bytes only: a deep child takes minutes \
         per process on this machine and would double the run.\n",
        p.deep_steps, p.memory_config
    );
    let _ = writeln!(
        o,
        "| policy | remat bytes | torch_remat bytes | torch.utils.checkpoint bytes | remat ÷ torch_remat | remat ÷ torch.utils.checkpoint | remat peak RSS | remat forward growth |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for policy in POLICY_NAMES {
        let get = |imp: &str| {
            let imp = if policy == "none" && imp == "torch_remat" {
                "torch"
            } else {
                imp
            };
            r.bytes.get(&(imp.to_string(), policy.to_string())).copied()
        };
        let mut row = format!("| `{policy}` ");
        for imp in IMPLS {
            let _ = write!(row, "| {} ", get(imp).map_or("–".into(), mib));
        }
        for peer in ["torch_remat", "torch"] {
            let _ = match (get("remat"), get(peer)) {
                (Some(a), Some(b)) if b > 0 => write!(row, "| {:.3} ", a as f64 / b as f64),
                _ => write!(row, "| – "),
            };
        }
        let v = r.rss.get(&("remat".to_string(), policy.to_string()));
        let _ = write!(
            row,
            "| {} | {} ",
            v.map_or("–".into(), |v| mib(v.0)),
            v.map_or("–".into(), |v| mib(v.1))
        );
        let _ = writeln!(o, "{row}|");
    }

    let _ = writeln!(
        o,
        "\n**Page faults and steps per process**, medium config: a fresh process per \
         implementation, policy and allocator setting (the children run one after another) \
         runs {} steps and reports the minor page faults (/proc/self/stat; `ru_minflt` in \
         Python) and the seconds of the steps after the first, per step: each policy's steady \
         state in a process of its own, as a training loop runs it. A page fault is memory the \
         allocator got back from the system and touched again: with glibc's defaults freed \
         memory at the top of the heap goes back to the system, and a process whose heap holds \
         other objects above it (Python's) cannot give it back, so the same ops fault more or \
         less depending on the process, not on the checkpointing. Pinned is the setting of \
         section 1 (How it is measured). One child per cell is noisy: section 1 is the \
         comparison of time.\n",
        p.fault_steps
    );
    let _ = writeln!(
        o,
        "| policy | allocator | remat faults | torch.utils.checkpoint faults | remat step | torch.utils.checkpoint step | remat ÷ torch.utils.checkpoint |\n\
         | --- | --- | --- | --- | --- | --- | --- |"
    );
    for pinned in [false, true] {
        for policy in POLICY_NAMES {
            let get = |imp: &str| {
                r.faults
                    .get(&(imp.to_string(), policy.to_string(), pinned))
                    .copied()
            };
            let (a, b) = (get("remat"), get("torch"));
            let faults = |v: Option<(f64, f64)>| v.map_or("–".into(), |(f, _)| format!("{f:.0}"));
            let secs = |v: Option<(f64, f64)>| {
                v.map_or("–".into(), |(_, s)| format!("{:.1} ms", s * 1e3))
            };
            let ratio = match (a, b) {
                (Some((_, x)), Some((_, y))) if y > 0.0 => format!("{:.2}", x / y),
                _ => "–".into(),
            };
            let _ = writeln!(
                o,
                "| `{policy}` | {} | {} | {} | {} | {} | {ratio} |",
                if pinned { "pinned" } else { "defaults" },
                faults(a),
                faults(b),
                secs(a),
                secs(b),
            );
        }
    }

    // 3. Per-region overhead.
    let _ = writeln!(
        o,
        "\n## 3. Per-region overhead\n\n\
         A checkpoint around a chain of 200 `y = x * 1.0001` on a 1-element tensor, as 200 \
         regions alternating `Save` and `Recompute`, against the same chain in a checkpoint \
         without regions: ((checkpoint + regions) − (checkpoint alone)) / 200, per round \
         (each variant's value in a round is the least of {} runs, the two variants \
         alternating run by run: on a shared machine a run is only ever slowed down, by \
         preemption, and a chain lasts a few milliseconds, about one time slice), then the median and \
         quartiles over {} rounds. Region names are literals (no formatting per call). The \
         two chains are two checkpoints by name, as two blocks of a model are: each starts its \
         tables at the sizes its own last call reached. For \
         torch_remat the regions are `remat.region(f, name, recompute=i % 2 == 1)`. \
         `torch.utils.checkpoint` has no regions: its row is selective activation \
         checkpointing deciding `MUST_SAVE` / `PREFER_RECOMPUTE` alternately for each of the \
         200 ops, against plain non-reentrant checkpointing. The section runs first in both \
         processes, before any model: after the medium model's steps the same chain costs about \
         0.2 µs more per region on the forward (section 6), an effect of the heap they leave \
         behind. Target for remat: at most 0.5 µs forward and 0.6 µs forward+backward.\n",
        p.chain_reps, p.chain_rounds
    );
    let _ = writeln!(
        o,
        "| implementation | forward, per region | forward+backward, per region | chain alone, forward+backward | chain with regions, forward+backward |\n\
         | --- | --- | --- | --- | --- |"
    );
    for imp in IMPLS {
        let f = r.per_region(imp, false);
        let fb = r.per_region(imp, true);
        let alone = r.chain.get(&(imp.to_string(), false, true));
        let with = r.chain.get(&(imp.to_string(), true, true));
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} |",
            label(imp),
            us(summary(&f)),
            us(summary(&fb)),
            alone.map_or("–".into(), |v| ms(summary(v))),
            with.map_or("–".into(), |v| ms(summary(v))),
        );
    }
    let rf = summary(&r.per_region("remat", false)).median;
    let rfb = summary(&r.per_region("remat", true)).median;
    let _ = writeln!(o);
    for peer in ["torch_remat", "torch"] {
        let pf = summary(&r.per_region(peer, false)).median;
        let pfb = summary(&r.per_region(peer, true)).median;
        let _ = writeln!(
            o,
            "remat's per-region cost is {:.3}× {}'s forward and {:.3}× forward+backward (ratio of medians).\n",
            rf / pf,
            label(peer),
            rfb / pfb
        );
    }
    o
}

/// One table of section 1: `config` at `t` threads.
pub fn render_steps(o: &mut String, r: &Results, config: &str, t: i32, rounds: usize) {
    let plural = if t == 1 { "" } else { "s" };
    let _ = writeln!(
        o,
        "### {config}, {t} thread{plural} ({rounds} rounds)\n\n\
         | policy | remat | × none | torch_remat | × none | torch.utils.checkpoint | × none | remat ÷ torch_remat | remat ÷ torch.utils.checkpoint |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for policy in POLICY_NAMES {
        let mut row = format!("| `{policy}` ");
        for imp in IMPLS {
            match (
                r.steps_of(config, t, imp, policy),
                r.steps_of(config, t, imp, "none"),
            ) {
                (Some(v), Some(base)) => {
                    let _ = write!(
                        row,
                        "| {} | {} ",
                        ms(summary(v)),
                        ratio(summary(&ratios(v, base)))
                    );
                }
                _ => row.push_str("| – | – "),
            }
        }
        for peer in ["torch_remat", "torch"] {
            match (
                r.steps_of(config, t, "remat", policy),
                r.steps_of(config, t, peer, policy),
            ) {
                (Some(a), Some(b)) => {
                    let _ = write!(row, "| {} ", ratio(summary(&ratios(a, b))));
                }
                _ => row.push_str("| – "),
            }
        }
        let _ = writeln!(o, "{row}|");
    }
    let losses: Vec<f64> = r
        .losses
        .iter()
        .filter(|(k, _)| k.0 == config && k.1 == t)
        .map(|(_, l)| *l)
        .collect();
    let same = losses.windows(2).all(|w| w[0] == w[1]);
    let _ = writeln!(
        o,
        "\nLoss of every variant: {} ({}).\n",
        losses.first().map_or("–".into(), |l| format!("{l:.7}")),
        if same {
            "bitwise the same in all of them"
        } else {
            "NOT the same in all variants"
        }
    );
}
