//! The parent's side of a data-parallel run: which ranks this machine runs
//! (`--ranks N` on a loopback store, or one rank of a run spanning machines
//! from `--rank/--world-size` or torchrun's variables), starting them per
//! policy, and the table of per-rank rows.
//!
//! Invariant: a policy's ranks are started together and end together: when
//! one fails, the others on this machine are killed, so no rank waits out
//! the process group's timeout for a peer that is gone.

use crate::format::human_ms;
use crate::options::{policy_name, Options};
use crate::protocol::{self, RunResult};
use remat::diagnostics::human_bytes;
use remat_reference::model::ModelPolicy;
use std::fmt::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The ranks this machine runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ranks {
    /// No data parallelism: one process per policy, as without it.
    One,
    /// `--ranks N`: ranks `0..N` here, the store on a free loopback port.
    Local(usize),
    /// One rank of a run spanning machines.
    Join {
        rank: usize,
        world: usize,
        addr: String,
        port: u16,
    },
}

impl Ranks {
    /// From the command line, else torchrun's variables (`RANK`,
    /// `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`).
    pub fn of(opts: &Options) -> Result<Ranks, String> {
        let world = match opts.ranks {
            0 => return Err("--ranks 0: give at least 1".into()),
            1 => None,
            n if opts.rank.is_some() => {
                return Err(format!("--ranks {n} starts its ranks here: drop --rank"))
            }
            n => Some(n),
        };
        let env = |name: &str| std::env::var(name).ok();
        let number = |name: &str, text: String| {
            text.trim()
                .parse::<usize>()
                .map_err(|_| format!("{name}={text:?} is not a number"))
        };
        let ranks = if let Some(n) = world {
            Ranks::Local(n)
        } else if let Some(rank) = opts
            .rank
            .or(env("RANK").map(|r| number("RANK", r)).transpose()?)
        {
            let world = match opts.world_size {
                Some(w) => w,
                None => number(
                    "WORLD_SIZE",
                    env("WORLD_SIZE").ok_or("--rank needs --world-size (or WORLD_SIZE)")?,
                )?,
            };
            let addr = opts
                .master_addr
                .clone()
                .or(env("MASTER_ADDR"))
                .ok_or("--rank needs --master-addr (or MASTER_ADDR): rank 0's address")?;
            let port = match opts.master_port {
                Some(p) => p,
                None => env("MASTER_PORT")
                    .ok_or("--rank needs --master-port (or MASTER_PORT): rank 0's store port")?
                    .trim()
                    .parse()
                    .map_err(|_| "MASTER_PORT is not a port".to_string())?,
            };
            Ranks::Join {
                rank,
                world,
                addr,
                port,
            }
        } else {
            Ranks::One
        };
        if opts.fsdp && ranks == Ranks::One {
            return Err(
                "--fsdp shards the model over ranks: add --ranks N (or --rank with the group's \
                 options)"
                    .into(),
            );
        }
        let b = opts.model_config().b as usize;
        match ranks.world() {
            Some(w) if !b.is_multiple_of(w) => Err(format!(
                "the {} config's batch of {b} rows does not split into {w} equal shards: use a \
                 world size that divides {b}",
                opts.config_name()
            )),
            _ => Ok(ranks),
        }
    }

    /// The world size of a data-parallel run.
    pub fn world(&self) -> Option<usize> {
        match self {
            Ranks::One => None,
            Ranks::Local(n) => Some(*n),
            Ranks::Join { world, .. } => Some(*world),
        }
    }

    /// What the header says.
    pub fn describe(&self, fsdp: bool) -> Option<String> {
        let how = if fsdp {
            "each on rows r, r+N, ... of every batch, parameters, gradients and AdamW state \
             sharded through remat_distributed's FullyShardedDataParallel"
        } else {
            "each on rows r, r+N, ... of every batch, through remat_distributed's DDP"
        };
        match self {
            Ranks::One => None,
            Ranks::Local(n) => Some(format!(
                "data-parallel: {n} ranks on this machine (Gloo over loopback), {how}"
            )),
            Ranks::Join {
                rank,
                world,
                addr,
                port,
            } => Some(format!(
                "data-parallel: rank {rank} of {world}, store at {addr}:{port}, {how}"
            )),
        }
    }
}

/// Trains `policy` on the ranks this machine runs; each rank's result,
/// rank order (this machine's ranks only).
pub fn run_policy(
    opts: &Options,
    ranks: &Ranks,
    policy: ModelPolicy,
    base: &dyn Fn() -> Result<Command, String>,
) -> Result<Vec<(usize, RunResult)>, String> {
    let (world, addr, port, here): (usize, String, u16, Vec<usize>) = match ranks {
        Ranks::One => unreachable!("a run without ranks starts one child"),
        Ranks::Local(n) => (*n, "127.0.0.1".into(), free_port()?, (0..*n).collect()),
        Ranks::Join {
            rank,
            world,
            addr,
            port,
        } => (*world, addr.clone(), *port, vec![*rank]),
    };
    let mut children: Vec<(usize, Child)> = Vec::new();
    let shared_out = matches!(ranks, Ranks::Local(_));
    for &rank in &here {
        let args = opts.rank_args(policy, rank, world, &addr, port, shared_out);
        if let Some(out) = args.iter().find_map(|a| a.strip_prefix("--out=")) {
            std::fs::create_dir_all(out).map_err(|e| format!("cannot create {out}: {e}"))?;
        }
        let mut cmd = base()?;
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        match cmd.spawn() {
            Ok(child) => children.push((rank, child)),
            Err(e) => {
                kill_all(&mut children);
                return Err(format!("cannot start rank {rank}: {e}"));
            }
        }
    }
    wait_all(&mut children, policy)?;
    children
        .into_iter()
        .map(|(rank, child)| {
            let out = child
                .wait_with_output()
                .map_err(|e| format!("rank {rank}: {e}"))?;
            Ok((
                rank,
                protocol::parse(policy, &String::from_utf8_lossy(&out.stdout))?,
            ))
        })
        .collect()
}

/// Waits for every rank; the first failure kills the rest.
fn wait_all(children: &mut [(usize, Child)], policy: ModelPolicy) -> Result<(), String> {
    let mut running: Vec<bool> = vec![true; children.len()];
    while running.iter().any(|r| *r) {
        for (i, (rank, child)) in children.iter_mut().enumerate() {
            if !running[i] {
                continue;
            }
            match child.try_wait() {
                Ok(Some(status)) if status.success() => running[i] = false,
                Ok(None) => {}
                Ok(Some(status)) => {
                    let rank = *rank;
                    kill_all(children);
                    return Err(format!(
                        "the {} run's rank {rank} failed ({status}); the other ranks were stopped",
                        policy_name(policy)
                    ));
                }
                Err(e) => return Err(format!("rank {rank}: {e}")),
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn kill_all(children: &mut [(usize, Child)]) {
    for (_, child) in children.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A port nobody listens on now, for the loopback store.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port for the store: {e}"))
}

/// One row per policy and rank: peak resident bytes, median step time and
/// the share of step time spent in c10d communication (DDP: the union of
/// the buckets' all-reduce spans, docs/semantics.md rule W9; sharded: of
/// the gathers' and reduce-scatters', rule F7, over the steps' total time);
/// sharded runs add what a rank holds (its shards of the parameters, their
/// gradients and AdamW's moments), the most parameters gathered at once in
/// backward, and how many of the last step's gathers were prefetched.
pub fn table(rows: &[(ModelPolicy, Vec<(usize, RunResult)>)]) -> String {
    let mut s = String::new();
    let sharded = rows
        .iter()
        .any(|(_, ranks)| ranks.iter().any(|(_, r)| r.sharded.is_some()));
    let _ = write!(
        s,
        "{:<10} {:>5} {:>14} {:>12} {:>14}",
        "policy", "rank", "peak resident", "median step", "communication"
    );
    if sharded {
        let _ = write!(
            s,
            " {:>11} {:>11} {:>11} {:>11} {:>11}",
            "parameters", "gradients", "optimizer", "gathered", "prefetched"
        );
    }
    s.push('\n');
    for (policy, ranks) in rows {
        for (rank, r) in ranks {
            let _ = write!(
                s,
                "{:<10} {:>5} {:>14} {:>12} {:>14}",
                policy_name(*policy),
                rank,
                r.peak_rss
                    .map(|b| human_bytes(b as i64))
                    .unwrap_or_else(|| "n/a".into()),
                human_ms(r.median_step_ns()),
                r.comm_share()
                    .map(|f| format!("{:.1}%", f * 100.0))
                    .unwrap_or_else(|| "n/a".into()),
            );
            if let Some(h) = &r.sharded {
                let _ = write!(
                    s,
                    " {:>11} {:>11} {:>11} {:>11} {:>11}",
                    human_bytes(h.params),
                    human_bytes(h.grads),
                    human_bytes(h.optimizer),
                    human_bytes(h.gathered),
                    format!("{}/{}", h.prefetched, h.gathers),
                );
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn ranks(args: &[&str]) -> Result<Ranks, String> {
        Ranks::of(
            &Options::try_parse_from(std::iter::once("train_gpt").chain(args.iter().copied()))
                .unwrap(),
        )
    }

    #[test]
    fn ranks_come_from_the_command_line_and_must_split_the_batch() {
        assert_eq!(ranks(&["--ranks", "2"]), Ok(Ranks::Local(2)));
        let joined = ranks(&[
            "--rank",
            "1",
            "--world-size",
            "2",
            "--master-addr",
            "10.0.0.1",
            "--master-port",
            "29500",
        ]);
        let want = Ranks::Join {
            rank: 1,
            world: 2,
            addr: "10.0.0.1".into(),
            port: 29500,
        };
        assert_eq!(joined, Ok(want));
        let err = ranks(&["--ranks", "3"]).unwrap_err();
        assert!(err.contains("does not split into 3 equal shards"), "{err}");
        let err = ranks(&["--ranks", "2", "--rank", "0"]).unwrap_err();
        assert!(err.contains("drop --rank"), "{err}");
        let err = ranks(&["--fsdp"]).unwrap_err();
        assert!(err.contains("--fsdp shards the model over ranks"), "{err}");
        assert_eq!(ranks(&["--fsdp", "--ranks", "2"]), Ok(Ranks::Local(2)));
    }
}
