//! Faults: bad variables, a rank that never arrives, a peer that leaves
//! (docs/semantics.md, rules W1, W2, W8).

use crate::launch::{free_port, launch, out_dir};
use remat_distributed::{
    DdpOptions, DistributedDataParallel, Error, InitOptions, ProcessGroup, ReduceOp,
};
use std::time::{Duration, Instant};

fn vars(list: &[(&str, &str)]) -> Result<InitOptions, Error> {
    let list: Vec<(String, String)> = list
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    InitOptions::from_vars(|n| list.iter().find(|v| v.0 == n).map(|v| v.1.clone()))
}

const GOOD: [(&str, &str); 4] = [
    ("RANK", "0"),
    ("WORLD_SIZE", "2"),
    ("MASTER_ADDR", "127.0.0.1"),
    ("MASTER_PORT", "29500"),
];

fn with(name: &str, value: Option<&str>) -> Vec<(&'static str, String)> {
    GOOD.iter()
        .filter(|(n, _)| *n != name)
        .map(|(n, v)| (*n, v.to_string()))
        .chain(value.map(|v| (GOOD.iter().find(|g| g.0 == name).unwrap().0, v.to_string())))
        .collect()
}

fn config_error(name: &str, value: Option<&str>) -> String {
    let list = with(name, value);
    let list: Vec<(&str, &str)> = list.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let err = vars(&list).and_then(|o| ProcessGroup::init(&o).map(|_| o));
    match err {
        Err(Error::Config(msg)) => msg,
        Err(other) => panic!("{name}={value:?}: not a Config error: {other}"),
        Ok(_) => panic!("{name}={value:?} was accepted"),
    }
}

/// docs/semantics.md, rule W1: each bad variable is refused before any
/// connection, by a message naming it and what to set.
#[test]
fn bad_variables_are_refused_by_name() {
    assert!(config_error("RANK", None).contains("RANK is not set"));
    assert!(config_error("WORLD_SIZE", Some("two")).contains("WORLD_SIZE=\"two\" is not a number"));
    assert!(config_error("RANK", Some("2")).contains("rank 2 is outside a world of 2 ranks"));
    for port in ["0", "abc", "70000"] {
        let msg = config_error("MASTER_PORT", Some(port));
        assert!(msg.contains("MASTER_PORT"), "{port}: {msg}");
    }
    let msg = config_error("MASTER_ADDR", Some("no-such-host.invalid"));
    assert!(
        msg.contains("MASTER_ADDR \"no-such-host.invalid\" does not resolve"),
        "{msg}"
    );
}

/// docs/semantics.md, rule W2: rank 0 alone, and rank 1 without a rank 0, get
/// an error naming the store and the fix within the timeout, not a hang.
#[test]
fn a_rank_that_never_arrives_gives_a_clear_error_within_the_timeout() {
    for rank in [0, 1] {
        let opts =
            InitOptions::new(rank, 2, "127.0.0.1", free_port()).timeout(Duration::from_secs(2));
        let start = Instant::now();
        let err = match ProcessGroup::init(&opts) {
            Err(e) => e,
            Ok(_) => panic!("rank {rank} formed a group alone"),
        };
        let took = start.elapsed();
        let msg = err.to_string();
        assert!(matches!(err, Error::Init(_)), "rank {rank}: {msg}");
        assert!(
            msg.contains(&format!("rank {rank} of 2 could not form the group")),
            "{msg}"
        );
        assert!(
            msg.contains("MASTER_PORT") && msg.contains("REMAT_DIST_TIMEOUT"),
            "{msg}"
        );
        assert!(
            took < Duration::from_secs(30),
            "rank {rank} took {took:?}: {msg}"
        );
    }
}

/// The child side of `a_peer_that_leaves_fails_the_next_collective`.
pub fn peer_leaves_rank_main() {
    let opts = InitOptions::from_env()
        .unwrap()
        .timeout(Duration::from_secs(5));
    let group = ProcessGroup::init(&opts).unwrap();
    group.barrier().unwrap();
    if group.rank() == 1 {
        // Gone without a word: the process ends and its sockets close.
        std::process::exit(0);
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut t = tch::Tensor::from(1.0f32);
    match group.all_reduce(&mut t, ReduceOp::Sum) {
        Ok(()) => println!("PEER_LEAVES: ok"),
        Err(e) => println!("PEER_LEAVES: {e}"),
    }
}

/// docs/semantics.md, rule W8: the survivor's next collective is an `Err`
/// naming it, within the timeout.
#[test]
fn a_peer_that_leaves_fails_the_next_collective() {
    let dir = out_dir("leaves");
    let runs = launch("peer_leaves", 2, |_| true, &dir, Duration::from_secs(60));
    assert!(runs[0].success, "rank 0 failed:\n{}", runs[0].output);
    let line = runs[0]
        .output
        .lines()
        .find_map(|l| l.split_once("PEER_LEAVES: ").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("rank 0 printed nothing:\n{}", runs[0].output));
    assert!(
        line.starts_with("all_reduce on rank 0 of 2 failed"),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child side of `a_peer_that_leaves_fails_the_next_backward_as_an_error`:
/// one data-parallel step on both ranks, then rank 1 leaves and rank 0 runs
/// another step's backward through `DistributedDataParallel::backward`.
pub fn peer_leaves_in_backward_rank_main() {
    let opts = InitOptions::from_env()
        .unwrap()
        .timeout(Duration::from_secs(5));
    let group = ProcessGroup::init(&opts).unwrap();
    let w = tch::Tensor::from_slice(&[0.5f32, -0.25, 0.75, 1.0])
        .view([2, 2])
        .set_requires_grad(true);
    let ddp =
        DistributedDataParallel::new(&group, &[w.shallow_clone()], DdpOptions::default()).unwrap();
    let x = tch::Tensor::from_slice(&[1.0f32, 2.0]).view([1, 2]);
    let step = || {
        let loss = ddp.forward(|| x.matmul(&w).tanh().sum(tch::Kind::Float))?;
        ddp.backward(&loss)
    };
    // Two steps: the second forward rebuilds the buckets (a collective);
    // after it, a step's only communication is in its backward.
    step().unwrap();
    step().unwrap();
    group.barrier().unwrap();
    if group.rank() == 1 {
        std::process::exit(0);
    }
    std::thread::sleep(Duration::from_millis(200));
    match step() {
        Ok(()) => println!("LEFT_IN_BACKWARD: ok"),
        Err(e @ Error::Collective(_)) => println!("LEFT_IN_BACKWARD: collective: {e}"),
        Err(e) => println!("LEFT_IN_BACKWARD: other: {e}"),
    }
}

/// docs/semantics.md, rule W8: a peer that leaves between two steps fails
/// the survivor's next backward as an `Error::Collective` naming the rank,
/// the world and the timeout, within the timeout, not as a panic.
#[test]
fn a_peer_that_leaves_fails_the_next_backward_as_an_error() {
    let dir = out_dir("leaves_in_backward");
    let runs = launch(
        "peer_leaves_in_backward",
        2,
        |_| true,
        &dir,
        Duration::from_secs(60),
    );
    assert!(runs[0].success, "rank 0 failed:\n{}", runs[0].output);
    let line = runs[0]
        .output
        .lines()
        .find_map(|l| l.split_once("LEFT_IN_BACKWARD: ").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("rank 0 printed nothing:\n{}", runs[0].output));
    assert!(
        line.starts_with("collective: the gradients' all-reduce in backward on rank 0 of 2 failed")
            && line.contains("5s"),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
