//! glibc's allocator, pinned for the timed rounds (docs/performance.md, "How
//! it is measured").
//!
//! With glibc's defaults a freed tensor may go back to the system (an
//! mmapped chunk, or the heap's top past the trim threshold), and the next
//! step that needs the memory faults it in again. How much goes back
//! depends on the step before: in interleaved rounds a step after `none`
//! finds a large heap, one after `full` a small one, so each variant's time
//! depends on its neighbour in the round rather than on its own work.
//! Pinned (no mmap below 32 MiB, no trimming), the heap keeps what the
//! largest step needed and every step runs on it. glibc reads these
//! variables once, at start-up, so the bench restarts itself with them set;
//! the children that measure the defaults (page faults) or resident size
//! (memory) set their own.

use std::process::Command;

/// The settings every timed process runs with, this bench and the Python
/// worker it starts (which inherits them).
const PINNED: [(&str, &str); 2] = [
    // glibc's largest accepted mmap threshold on 64-bit: a tensor below
    // 32 MiB comes from the heap.
    ("MALLOC_MMAP_THRESHOLD_", "33554432"),
    // The heap's top is never given back.
    ("MALLOC_TRIM_THRESHOLD_", "17179869184"),
];

/// Set in the restarted process (and inherited by its children): it does
/// not restart again. Set by hand (any value), the bench runs with the
/// allocator settings of its environment instead, e.g. glibc's defaults.
const MARK: &str = "REMAT_BENCH_PINNED";

/// The settings as `NAME=value` pairs, for the report.
pub fn describe() -> String {
    PINNED
        .iter()
        .map(|(k, v)| format!("`{k}={v}`"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Restarts this process with the pinned settings unless it already runs
/// with them, and exits with the restarted process's status. Returns only
/// in the pinned process.
pub fn ensure_pinned() {
    if std::env::var_os(MARK).is_some() {
        return;
    }
    let status = std::env::current_exe()
        .map_err(|e| e.to_string())
        .and_then(|exe| {
            let mut cmd = Command::new(exe);
            cmd.args(std::env::args_os().skip(1)).env(MARK, "1");
            for (k, v) in PINNED {
                cmd.env(k, v);
            }
            cmd.status().map_err(|e| e.to_string())
        });
    match status {
        Ok(s) => std::process::exit(s.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("bench: error: cannot restart with glibc's allocator pinned: {e}");
            std::process::exit(1);
        }
    }
}

/// `cmd` pinned as this process is (it inherits the settings) or, when not
/// `pinned`, with glibc's defaults (none of the settings inherited).
pub fn setting(cmd: &mut Command, pinned: bool) -> &mut Command {
    if !pinned {
        for (k, _) in PINNED {
            cmd.env_remove(k);
        }
    }
    cmd
}
