//! The command line: which policies, which model size, how long, where to
//! write the plots.
//!
//! Invariant: a child process gets the same options as its parent, with one
//! policy and `--child` (see `Options::child_args`).

use clap::{Parser, ValueEnum};
use remat_reference::model::{Config, ModelPolicy, DEEP, MEDIUM, POLICIES, SMALL};
use std::path::PathBuf;

/// Trains remat's reference model on a byte corpus under checkpointing
/// policies and reports loss, step time and memory for each.
#[derive(Parser, Clone, Debug)]
#[command(version, about)]
pub struct Options {
    /// Checkpointing policy, or `all` for each in turn.
    #[arg(long, value_enum, default_value = "all")]
    pub policy: PolicyArg,
    /// Model size (reference-model.md): small D=64 L=2, medium D=256 L=4,
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
    /// Fail unless the loss curves of all policies are bitwise equal.
    #[arg(long)]
    pub check: bool,
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
}

/// The sizes of reference-model.md.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigArg {
    Small,
    Medium,
    Deep,
}

impl Options {
    /// The policies to train, in table order.
    pub fn policies(&self) -> Vec<ModelPolicy> {
        match self.policy {
            PolicyArg::None => vec![ModelPolicy::None],
            PolicyArg::Full => vec![ModelPolicy::Full],
            PolicyArg::Selective => vec![ModelPolicy::Selective],
            PolicyArg::SaveMlp => vec![ModelPolicy::SaveMlp],
            PolicyArg::All => POLICIES.to_vec(),
        }
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
        vec![
            "--child".into(),
            format!("--policy={}", policy_name(policy)),
            format!("--config={}", self.config_name()),
            format!("--steps={}", self.steps),
            format!("--threads={}", self.threads),
            format!("--seed={}", self.seed),
            format!("--lr={}", self.lr),
            format!("--out={}", self.out.display()),
        ]
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
