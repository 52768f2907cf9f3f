//! The command line: which policies, which model size, how long, where to
//! write the plots, the memory budget of the planned (`auto`) run, the
//! precision of the forward (`--autocast`) and the device (`--device`).
//!
//! Invariant: a child process gets the same options as its parent, with one
//! policy and `--child` (see `Options::child_args`).

use clap::{Parser, ValueEnum};
use remat_reference::model::{Config, ModelPolicy, DEEP, MEDIUM, POLICIES, SMALL};
use remat_reference::numbers::parse_bytes;
use std::path::PathBuf;
use tch::{Device, Kind};

/// Trains remat's reference model on a byte corpus under checkpointing
/// policies and reports loss, step time and memory for each.
#[derive(Parser, Clone, Debug)]
#[command(version, about)]
pub struct Options {
    /// Checkpointing policy, or `all` for each in turn; several, comma
    /// separated (`none,full`), train each in turn.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub policy: Vec<PolicyArg>,
    /// Model size (docs/reference-model.md): small D=64 L=2, medium D=256 L=4,
    /// deep D=256 L=32.
    #[arg(long, value_enum, default_value = "small")]
    pub config: ConfigArg,
    /// Optimizer steps per policy.
    #[arg(long, default_value_t = 600)]
    pub steps: usize,
    /// libtorch intra-op threads (1 keeps the runs bitwise reproducible).
    #[arg(long, default_value_t = 1)]
    pub threads: i32,
    /// Seed of the parameters and of the batches.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// AdamW learning rate.
    #[arg(long, default_value_t = 2e-3)]
    pub lr: f64,
    /// Where the plots and the table go.
    #[arg(long, default_value = "train_gpt_out")]
    pub out: PathBuf,
    /// Fail unless the loss curves of all policies are bitwise equal (and,
    /// with `--budget`, the plan's predicted bytes are the measured ones).
    #[arg(long)]
    pub check: bool,
    /// Adds a run named `auto`: profile one step, plan for this many bytes
    /// kept for backward (e.g. `60MiB`, `400KiB`, a number of bytes), train
    /// under the plan. The plan goes to `<out>/plan.json`.
    #[arg(long, value_parser = budget_bytes, value_name = "BYTES")]
    pub budget: Option<i64>,
    /// The budget bounds the predicted peak during backward (at every point
    /// of the backward: docs/planner.md, "Peak during backward") instead of
    /// the kept bytes.
    #[arg(long, requires = "budget")]
    pub peak: bool,
    /// Mixed precision: the forward and the loss of every step (and of the
    /// profile, the evaluation and the block report) run under CPU autocast
    /// in this dtype; backward and AdamW stay outside it, on fp32 parameters.
    #[arg(long, value_enum, default_value = "off")]
    pub autocast: AutocastArg,
    /// Print every checkpoint and region of the model (`auto` blocks), its
    /// policy and the bytes it keeps when saved, then exit: what `--save`,
    /// `--recompute` and `--policy-file` patterns name.
    #[arg(long)]
    pub list_regions: bool,
    /// Adds a run named `auto` under a policy table: `auto` regions matching
    /// these patterns (`layers.*::attention`, `mlp`) save.
    #[arg(long, num_args = 1.., value_name = "PATTERN", conflicts_with = "budget")]
    pub save: Vec<String>,
    /// Like `--save`, for regions that offload: run once, what they keep
    /// is copied to the CPU and back in backward (after the `--save`
    /// rules).
    #[arg(long, num_args = 1.., value_name = "PATTERN", conflicts_with = "budget")]
    pub offload: Vec<String>,
    /// Like `--save`, for regions that recompute (after the `--save` and
    /// `--offload` rules, so these win where they match too).
    #[arg(long, num_args = 1.., value_name = "PATTERN", conflicts_with = "budget")]
    pub recompute: Vec<String>,
    /// Adds a run named `auto` under the table in FILE (a table file, or a
    /// plan file such as `plan.json`); `--save`, `--offload` and
    /// `--recompute` rules come after its own.
    #[arg(long, value_name = "FILE", conflicts_with = "budget")]
    pub policy_file: Option<PathBuf>,
    /// Where the model trains: cpu, cuda (device 0) or cuda:N. A CUDA
    /// device needs a build with the `cuda` feature and a visible GPU.
    #[arg(long, value_parser = device_arg, default_value = "cpu", value_name = "DEVICE")]
    pub device: Device,
    /// Data-parallel on this machine: each policy trains on N ranks, N
    /// processes joined through a loopback store on a free port, rank r
    /// training on rows r, r+N, ... of every batch through
    /// remat_distributed's DDP (the same global batch as one rank).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub ranks: usize,
    /// With --ranks N (or --rank): sharded data parallel instead of DDP,
    /// through remat_distributed's FullyShardedDataParallel: each block a
    /// unit, the embeddings, final norm and head a `root` unit; a rank
    /// holds 1/N of the parameters, gradients and AdamW state.
    #[arg(long)]
    pub fsdp: bool,
    /// Join a data-parallel run that spans machines as this rank (with
    /// --world-size, --master-addr, --master-port). Without it, torchrun's
    /// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are read when set.
    #[arg(long, value_name = "R")]
    pub rank: Option<usize>,
    /// The ranks of the whole run, over all machines (with --rank).
    #[arg(long, value_name = "N")]
    pub world_size: Option<usize>,
    /// Rank 0's address, where its store listens (with --rank).
    #[arg(long, value_name = "ADDR")]
    pub master_addr: Option<String>,
    /// The store's port on rank 0 (with --rank; the same for each policy's
    /// run, one after the other).
    #[arg(long, value_name = "PORT")]
    pub master_port: Option<u16>,
    /// Train the one given policy in this process and print machine-readable
    /// results (used by the parent process).
    #[arg(long, hide = true)]
    pub child: bool,
}

/// A policy of `ModelPolicy`, or all of them.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyArg {
    /// No checkpoints: autograd keeps everything.
    None,
    /// Each block a checkpoint with no `Save` region: only its input is kept.
    Full,
    /// Keep the attention output, recompute the MLP.
    Selective,
    /// Keep the MLP output, recompute the attention.
    #[value(name = "save_mlp", alias = "save-mlp")]
    SaveMlp,
    /// Each of the four, one process each.
    All,
    /// Only the planned run (needs `--budget`): each block as the plan says.
    #[value(alias = "plan")]
    Auto,
}

/// `--autocast`: fp32 throughout, or `torch.autocast("cpu", dtype)` around
/// the forward.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutocastArg {
    Off,
    Bf16,
    Fp16,
}

impl AutocastArg {
    /// The autocast dtype; `None` for `off`.
    pub fn kind(self) -> Option<Kind> {
        match self {
            AutocastArg::Off => None,
            AutocastArg::Bf16 => Some(Kind::BFloat16),
            AutocastArg::Fp16 => Some(Kind::Half),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AutocastArg::Off => "off",
            AutocastArg::Bf16 => "bf16",
            AutocastArg::Fp16 => "fp16",
        }
    }

    /// The run's precision on `device` in the title, the table file and
    /// the plots.
    pub fn precision(self, device: Device) -> String {
        let on = match device {
            Device::Cpu => "CPU",
            _ => "CUDA",
        };
        match self {
            AutocastArg::Off => "fp32".into(),
            AutocastArg::Bf16 => format!("{on} autocast bf16"),
            AutocastArg::Fp16 => format!("{on} autocast fp16"),
        }
    }

    /// Runs `f` under this precision, autocast for `device`'s type. Every
    /// forward of the program goes through here, so the planner profiles,
    /// and the table counts, what training's forward saves under the same
    /// autocast state.
    pub fn scope<R>(self, device: Device, f: impl FnOnce() -> R) -> R {
        match self.kind() {
            Some(kind) => remat::autocast(device, kind, f),
            None => f(),
        }
    }
}

/// The sizes of docs/reference-model.md.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigArg {
    Small,
    Medium,
    Deep,
}

impl Options {
    /// The policies to train, in table order: `--budget` adds the planned
    /// run (`ModelPolicy::Auto`) last.
    pub fn policies(&self) -> Vec<ModelPolicy> {
        let mut policies: Vec<ModelPolicy> = Vec::new();
        for arg in &self.policy {
            let named = match arg {
                PolicyArg::None => vec![ModelPolicy::None],
                PolicyArg::Full => vec![ModelPolicy::Full],
                PolicyArg::Selective => vec![ModelPolicy::Selective],
                PolicyArg::SaveMlp => vec![ModelPolicy::SaveMlp],
                PolicyArg::All => POLICIES.to_vec(),
                PolicyArg::Auto => vec![],
            };
            for p in named {
                if !policies.contains(&p) {
                    policies.push(p);
                }
            }
        }
        if self.budget.is_some() || self.has_table() || self.policy.contains(&PolicyArg::Auto) {
            policies.push(ModelPolicy::Auto);
        }
        policies
    }

    /// Whether the `auto` run trains under a policy table (not a plan).
    pub fn has_table(&self) -> bool {
        !self.save.is_empty()
            || !self.offload.is_empty()
            || !self.recompute.is_empty()
            || self.policy_file.is_some()
    }

    /// The budget of the planned run; an error naming the fix without one.
    pub fn budget(&self) -> Result<i64, String> {
        self.budget.ok_or_else(|| {
            "the `auto` run plans for a memory budget: give one with --budget (e.g. 60MiB)".into()
        })
    }

    pub fn model_config(&self) -> Config {
        match self.config {
            ConfigArg::Small => SMALL,
            ConfigArg::Medium => MEDIUM,
            ConfigArg::Deep => DEEP,
        }
    }

    pub fn config_name(&self) -> &'static str {
        match self.config {
            ConfigArg::Small => "small",
            ConfigArg::Medium => "medium",
            ConfigArg::Deep => "deep",
        }
    }

    /// The arguments that make a child process train `policy` alone.
    pub fn child_args(&self, policy: ModelPolicy) -> Vec<String> {
        let mut args = vec![
            "--child".into(),
            format!("--policy={}", policy_name(policy)),
            format!("--config={}", self.config_name()),
            format!("--steps={}", self.steps),
            format!("--threads={}", self.threads),
            format!("--seed={}", self.seed),
            format!("--lr={}", self.lr),
            format!("--out={}", self.out.display()),
            format!("--autocast={}", self.autocast.name()),
            format!("--device={}", device_name(self.device)),
        ];
        // Only the planned run plans: with a budget, another child would
        // also train `auto`.
        if policy == ModelPolicy::Auto {
            if let Some(bytes) = self.budget {
                args.push(format!("--budget={bytes}"));
            }
            if self.peak {
                args.push("--peak".into());
            }
            for p in &self.save {
                args.push(format!("--save={p}"));
            }
            for p in &self.offload {
                args.push(format!("--offload={p}"));
            }
            for p in &self.recompute {
                args.push(format!("--recompute={p}"));
            }
            if let Some(file) = &self.policy_file {
                args.push(format!("--policy-file={}", file.display()));
            }
        }
        args
    }
}

/// `--budget`'s value, read as the planner reads sizes.
impl Options {
    /// A data-parallel child's arguments: `child_args` plus its place in
    /// the group; with `shared_out` (ranks sharing a machine) ranks other
    /// than 0 write under `<out>/rank<R>`, so that no two write the same
    /// plan file; `--check`
    /// makes the child compare parameters across ranks after each step.
    pub fn rank_args(
        &self,
        policy: ModelPolicy,
        rank: usize,
        world: usize,
        addr: &str,
        port: u16,
        shared_out: bool,
    ) -> Vec<String> {
        let mut args: Vec<String> = self
            .child_args(policy)
            .into_iter()
            .filter(|a| !a.starts_with("--out="))
            .collect();
        let out = match rank {
            r if shared_out && r > 0 => self.out.join(format!("rank{r}")),
            _ => self.out.clone(),
        };
        args.push(format!("--out={}", out.display()));
        args.extend([
            format!("--rank={rank}"),
            format!("--world-size={world}"),
            format!("--master-addr={addr}"),
            format!("--master-port={port}"),
        ]);
        if self.check {
            args.push("--check".into());
        }
        if self.fsdp {
            args.push("--fsdp".into());
        }
        args
    }
}

fn budget_bytes(text: &str) -> Result<i64, String> {
    match parse_bytes(text) {
        Ok(bytes) if bytes > 0 => Ok(bytes),
        Ok(_) => Err("a budget must be more than 0 bytes".into()),
        Err(e) => Err(e),
    }
}

/// `--device`'s value, checked against the machine (`remat::diagnostics::device::parse`).
fn device_arg(text: &str) -> Result<Device, String> {
    remat::diagnostics::device::parse(text).map_err(|e| e.to_string())
}

/// A device as `--device` names it.
pub fn device_name(device: Device) -> String {
    match device {
        Device::Cuda(i) => format!("cuda:{i}"),
        _ => "cpu".into(),
    }
}

/// The name a policy has on the command line and in the table.
pub fn policy_name(policy: ModelPolicy) -> &'static str {
    match policy {
        ModelPolicy::None => "none",
        ModelPolicy::Full => "full",
        ModelPolicy::Selective => "selective",
        ModelPolicy::SaveMlp => "save_mlp",
        ModelPolicy::Auto => "auto",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(std::iter::once("train_gpt").chain(args.iter().copied()))
    }

    #[test]
    fn a_budget_adds_the_planned_run_last_and_reaches_the_child() {
        let opts = parse(&["--budget", "60MiB", "--peak"]).unwrap();
        assert_eq!(opts.budget, Some(60 << 20));
        let mut expected = POLICIES.to_vec();
        expected.push(ModelPolicy::Auto);
        assert_eq!(opts.policies(), expected);
        let child = Options::try_parse_from(
            std::iter::once("train_gpt".to_string()).chain(opts.child_args(ModelPolicy::Auto)),
        )
        .unwrap();
        assert_eq!(child.policies(), [ModelPolicy::Auto]);
        assert_eq!(child.budget, Some(60 << 20));
        assert!(child.peak);
        let none = Options::try_parse_from(
            std::iter::once("train_gpt".to_string()).chain(opts.child_args(ModelPolicy::None)),
        )
        .unwrap();
        assert_eq!(none.policies(), [ModelPolicy::None]);
        assert_eq!(none.autocast, AutocastArg::Off);
    }

    #[test]
    fn table_options_add_the_auto_run_and_reach_its_child_only() {
        let opts = parse(&[
            "--policy",
            "none",
            "--save",
            "layers.*::attention",
            "mlp",
            "--offload",
            "layers.0::mlp",
            "--recompute",
            "layers.1::*",
        ])
        .unwrap();
        assert!(opts.has_table());
        assert_eq!(opts.policies(), [ModelPolicy::None, ModelPolicy::Auto]);
        let child = Options::try_parse_from(
            std::iter::once("train_gpt".to_string()).chain(opts.child_args(ModelPolicy::Auto)),
        )
        .unwrap();
        assert_eq!(child.save, ["layers.*::attention", "mlp"]);
        assert_eq!(child.offload, ["layers.0::mlp"]);
        assert_eq!(child.recompute, ["layers.1::*"]);
        let none = Options::try_parse_from(
            std::iter::once("train_gpt".to_string()).chain(opts.child_args(ModelPolicy::None)),
        )
        .unwrap();
        assert!(!none.has_table());
        assert!(parse(&["--save", "mlp", "--budget", "1MiB"]).is_err());
    }

    #[test]
    fn autocast_reaches_the_child_and_scopes_the_forward() {
        let opts = parse(&["--autocast", "bf16"]).unwrap();
        let child = Options::try_parse_from(
            std::iter::once("train_gpt".to_string()).chain(opts.child_args(ModelPolicy::Full)),
        )
        .unwrap();
        assert_eq!(child.autocast, AutocastArg::Bf16);
        assert_eq!(
            child
                .autocast
                .scope(Device::Cpu, || remat::AutocastGuard::current(Device::Cpu)),
            Some(Kind::BFloat16)
        );
        assert_eq!(remat::AutocastGuard::current(Device::Cpu), None);
        assert_eq!(
            AutocastArg::Off.scope(Device::Cpu, || remat::AutocastGuard::current(Device::Cpu)),
            None
        );
        assert!(parse(&["--autocast", "fp64"]).is_err());
    }

    #[test]
    fn the_device_reaches_the_child_and_a_bad_or_absent_one_is_refused() {
        let opts = parse(&[]).unwrap();
        assert_eq!(opts.device, Device::Cpu);
        let child = Options::try_parse_from(
            std::iter::once("train_gpt".to_string()).chain(opts.child_args(ModelPolicy::None)),
        )
        .unwrap();
        assert_eq!(child.device, Device::Cpu);
        let err = parse(&["--device", "gpu"]).unwrap_err().to_string();
        assert!(
            err.contains("`gpu` is not a device; give cpu, cuda or cuda:N"),
            "{err}"
        );
        if !tch::Cuda::is_available() {
            let err = parse(&["--device", "cuda:0"]).unwrap_err().to_string();
            assert!(err.contains("no CUDA device is visible"), "{err}");
        }
        assert_eq!(
            AutocastArg::Bf16.precision(Device::Cpu),
            "CPU autocast bf16"
        );
        assert_eq!(
            AutocastArg::Fp16.precision(Device::Cuda(0)),
            "CUDA autocast fp16"
        );
    }

    #[test]
    fn the_planned_run_alone_needs_a_budget() {
        let opts = parse(&["--policy", "plan"]).unwrap();
        assert_eq!(opts.policies(), [ModelPolicy::Auto]);
        assert!(opts.budget().unwrap_err().contains("--budget"));
        assert_eq!(
            parse(&["--policy", "none", "--budget", "400KiB"])
                .unwrap()
                .policies(),
            [ModelPolicy::None, ModelPolicy::Auto]
        );
    }

    #[test]
    fn a_budget_that_is_not_a_size_is_refused_with_the_planners_words() {
        let err = parse(&["--budget", "lots"]).unwrap_err().to_string();
        assert!(err.contains("is not a size"), "{err}");
        assert!(parse(&["--budget", "0"]).is_err());
        assert!(parse(&["--peak"]).is_err(), "--peak without --budget");
    }

    #[test]
    fn a_policy_list_trains_each_named_policy_once() {
        let opts = parse(&["--policy", "none,full,none", "--budget", "1MiB"]).unwrap();
        assert_eq!(
            opts.policies(),
            [ModelPolicy::None, ModelPolicy::Full, ModelPolicy::Auto]
        );
    }

    #[test]
    fn rank_args_place_the_child_in_the_group_and_keep_its_files_apart() {
        let opts = parse(&["--ranks", "2", "--check", "--out", "o"]).unwrap();
        let args = opts.rank_args(ModelPolicy::Full, 1, 2, "127.0.0.1", 1234, true);
        let child =
            Options::try_parse_from(std::iter::once("train_gpt".to_string()).chain(args)).unwrap();
        assert!(child.child && child.check);
        assert_eq!(child.policies(), [ModelPolicy::Full]);
        assert_eq!((child.rank, child.world_size), (Some(1), Some(2)));
        assert_eq!(child.master_addr.as_deref(), Some("127.0.0.1"));
        assert_eq!(child.master_port, Some(1234));
        assert_eq!(child.out, PathBuf::from("o").join("rank1"));
        let zero = opts.rank_args(ModelPolicy::Full, 0, 2, "127.0.0.1", 1234, true);
        assert!(zero.contains(&"--out=o".to_string()), "{zero:?}");
        assert!(!child.fsdp);
        let sharded = parse(&["--ranks", "2", "--fsdp"]).unwrap();
        let args = sharded.rank_args(ModelPolicy::Full, 1, 2, "127.0.0.1", 1234, true);
        assert!(args.contains(&"--fsdp".to_string()), "{args:?}");
    }
}
