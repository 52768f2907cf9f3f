//! Starting ranks as child processes, bounded in time.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The variable that turns `rank_entry` into a rank.
pub const SCENARIO: &str = "REMAT_DIST_TEST_SCENARIO";
/// Where a rank writes its results.
pub const OUT: &str = "REMAT_DIST_TEST_OUT";

/// A port nobody listens on now (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What one rank left behind.
pub struct RankRun {
    pub success: bool,
    pub output: String,
}

/// A fresh folder for one launch's results.
pub fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remat-dist-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `scenario` on ranks `0..world` (all of them, or those `start`
/// keeps) with torchrun's variables, killing any rank still running after
/// `limit`.
pub fn launch(
    scenario: &str,
    world: usize,
    start: impl Fn(usize) -> bool,
    out: &std::path::Path,
    limit: Duration,
) -> Vec<RankRun> {
    let port = free_port().to_string();
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..world)
        .filter(|r| start(*r))
        .map(|rank| {
            let child = Command::new(&exe)
                .args(["rank_entry", "--exact", "--nocapture", "--test-threads=1"])
                .env(SCENARIO, scenario)
                .env(OUT, out)
                .env("RANK", rank.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("WORLD_SIZE", world.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (rank, child)
        })
        .collect();
    let deadline = Instant::now() + limit;
    let mut runs = Vec::new();
    for (_, child) in children.iter_mut() {
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for (rank, child) in children {
        let done = child.wait_with_output().unwrap();
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&done.stdout),
            String::from_utf8_lossy(&done.stderr)
        );
        assert!(
            done.status.code().is_some(),
            "rank {rank} was still running after {limit:?} (killed):\n{output}"
        );
        runs.push(RankRun {
            success: done.status.success(),
            output,
        });
    }
    runs
}

/// [`launch_all`] in a world of two.
pub fn launch_both(scenario: &str, limit: Duration) -> (PathBuf, Vec<RankRun>) {
    launch_all(scenario, 2, limit)
}

/// Runs `scenario` on every rank of a world of `world`, in a fresh folder
/// of its name and size, and fails the test unless every rank succeeded.
pub fn launch_all(scenario: &str, world: usize, limit: Duration) -> (PathBuf, Vec<RankRun>) {
    let dir = out_dir(&format!("{scenario}{world}"));
    let runs = launch(scenario, world, |_| true, &dir, limit);
    for (rank, run) in runs.iter().enumerate() {
        assert!(
            run.success,
            "world {world}, rank {rank} failed:\n{}",
            run.output
        );
    }
    (dir, runs)
}

/// Runs `f`, which draws a model from tch's global generator after
/// `manual_seed` (the parent's reference models), while no other test of
/// this binary does: tests run on several threads, and interleaved draws
/// would give each a different model.
pub fn seeded<T>(f: impl FnOnce() -> T) -> T {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    f()
}
