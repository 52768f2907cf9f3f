//! docs/training-example.md: the runs of the training example whose output
//! the README describes (every policy on the small and medium configs, plans
//! for a budget, fp32 against bf16), each with its command line and its
//! output as printed, under the machine they ran on. Written by `cargo xtask
//! bench` after docs/performance.md, or alone by `cargo xtask bench
//! --training-example`, so that no measured figure lives in the README.

use crate::libtorch_range::locked_versions;
use crate::paths::repo_root;
use crate::setup::torch_version;
use crate::train_gpt::train_output;
use crate::Result;
use std::fmt::Write;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Where each run writes its plots, table and plan, relative to the
/// training example's folder (the runs' working directory).
const OUT: &str = "../../target/training_example";

/// One run of the training example.
struct Run {
    /// Its heading in the file (what the README cites).
    title: &'static str,
    /// Its folder under [`OUT`].
    slug: &'static str,
    /// Its flags, `--out` left out.
    flags: &'static str,
    /// What it is, above its output.
    about: &'static str,
}

const SMALL_ALL: Run = Run {
    title: "Small config, every policy",
    slug: "small_all",
    flags: "--config small --policy all --steps 2000 --check",
    about: "The run `cargo xtask demo` makes, with `--check` (as `cargo xtask soak` runs it): the \
            README's *Training with less memory* says what each column means.",
};

const MEDIUM_ALL: Run = Run {
    title: "Medium config, every policy",
    slug: "medium_all",
    flags: "--config medium --steps 3 --check",
    about: "The medium config, where the activations are no longer small against libtorch's own \
            footprint, so that *peak resident* shows what the policies save.",
};

const SMALL_BUDGET: Run = Run {
    title: "Small config under a budget",
    slug: "small_budget",
    flags: "--config small --budget 600KiB --steps 8 --check",
    about: "Every policy and a plan for 600 KiB kept for backward, as `cargo xtask test` runs it \
            (unoptimized there): the README's *Training under a memory budget* explains the \
            plan's lines.",
};

const MEDIUM_BUDGET: Run = Run {
    title: "Medium config under a budget",
    slug: "medium_budget",
    flags: "--config medium --policy none --budget 60MiB --steps 5",
    about: "`none` and a plan for 60 MiB kept for backward on the medium config.",
};

const MEDIUM_FP32: Run = Run {
    title: "Medium config, fp32",
    slug: "medium_fp32",
    flags: "--config medium --steps 2 --check --autocast off",
    about: "The fp32 side of the comparison above.",
};

const MEDIUM_BF16: Run = Run {
    title: "Medium config, bf16",
    slug: "medium_bf16",
    flags: "--config medium --steps 2 --check --autocast bf16",
    about: "The bf16 side: every forward under CPU bf16 autocast.",
};

const SMALL_BF16: Run = Run {
    title: "Small config under a budget, bf16",
    slug: "small_budget_bf16",
    flags: "--config small --budget 600KiB --steps 8 --check --autocast bf16",
    about: "The run of *Small config under a budget* under CPU bf16 autocast, as `cargo xtask \
            test` runs it (unoptimized there); its fp32 side is that section.",
};

/// The order the runs are made in (the file's order is its own).
const RUNS: [&Run; 7] = [
    &SMALL_ALL,
    &MEDIUM_ALL,
    &SMALL_BUDGET,
    &MEDIUM_BUDGET,
    &MEDIUM_FP32,
    &MEDIUM_BF16,
    &SMALL_BF16,
];

/// A run's command line (in the training example's folder) and its output.
struct Done {
    command: String,
    output: String,
}

/// `cargo xtask bench --training-example`: makes every run of [`RUNS`] with
/// the training example built as `demo` builds it and writes
/// docs/training-example.md. `torch` is the libtorch `setup` installed.
pub(crate) fn training_doc(torch: &Path) -> Result<()> {
    let started = Instant::now();
    let mut done = Vec::new();
    for (i, run) in RUNS.iter().enumerate() {
        let out = format!("{OUT}/{}", run.slug);
        let mut flags: Vec<&str> = run.flags.split_whitespace().collect();
        flags.extend(["--out", &out]);
        let command = format!("cargo run --release -- {}", flags.join(" "));
        eprintln!(
            "xtask bench: the training example, run {} of {} ({}): {command}",
            i + 1,
            RUNS.len(),
            run.title
        );
        let output = clean(&train_output(&flags)?);
        done.push(Done { command, output });
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let text = render(torch, &done, minutes)?;
    let path = repo_root().join("docs").join("training-example.md");
    fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!(
        "xtask bench: wrote {} ({minutes:.1} minutes)",
        path.display()
    );
    Ok(())
}

/// The output as a reader sees it at the end: no terminal escapes, each
/// line as its last carriage return left it, the repository's absolute path
/// left out.
fn clean(output: &str) -> String {
    let root = format!("{}/", repo_root().display());
    let mut text = String::new();
    for line in output.lines() {
        let line = line.rsplit('\r').next().unwrap_or("");
        let _ = writeln!(text, "{}", strip_ansi(line).trim_end().replace(&root, ""));
    }
    text.trim_matches('\n').to_string()
}

/// `line` without its ANSI escape sequences (`ESC [ ... final byte`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

fn render(torch: &Path, done: &[Done], minutes: f64) -> Result<String> {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# The training example's runs\n\n\
         Written by `cargo xtask bench` (after docs/performance.md), or by `cargo xtask bench \
         --training-example` for this file alone, on {} in {minutes:.0} minutes. Each section is one run of the training example `examples/train_gpt`, \
         built optimized as `cargo xtask demo` builds it (`cargo run --release` in its folder, \
         target folder `target/train_gpt`): the command line as run there, then what it \
         printed (the progress bars, on standard error, left out). The README's sections \
         *Training with less memory*, *Training under a memory budget* and *Mixed precision* \
         say what the columns, plans and reports mean; this file holds what the last run \
         measured. The figures move with the machine and, a little, with the repository's \
         text, which is the corpus.\n",
        today()
    );
    let _ = writeln!(o, "## Machine\n");
    let _ = writeln!(o, "| | |\n| --- | --- |");
    let _ = writeln!(o, "| CPU | {} |", cpu_model());
    let _ = writeln!(o, "| nproc | {} |", first_line("nproc", &[]));
    let _ = writeln!(o, "| rustc | {} |", first_line("rustc", &["-V"]));
    let _ = writeln!(
        o,
        "| libtorch | the PyPI wheel torch {} (tch {}, examples/train_gpt/Cargo.lock) |",
        torch_version(torch).unwrap_or_else(|| "unknown".into()),
        locked_tch().unwrap_or_else(|| "unknown".into())
    );
    let _ = writeln!(
        o,
        "| threads | 1 intra-op thread (the example's default `--threads 1`) |\n"
    );

    let by_run = |run: &Run| {
        let i = RUNS
            .iter()
            .position(|r| r.slug == run.slug)
            .expect("every run is in RUNS");
        &done[i]
    };
    let section = |o: &mut String, level: &str, run: &Run| {
        let d = by_run(run);
        let _ = writeln!(
            o,
            "{level} {}\n\n{}\n\n```sh\n{}\n```\n\n```text\n{}\n```\n",
            run.title, run.about, d.command, d.output
        );
    };
    section(&mut o, "##", &SMALL_ALL);
    section(&mut o, "##", &MEDIUM_ALL);
    section(&mut o, "##", &SMALL_BUDGET);
    section(&mut o, "##", &MEDIUM_BUDGET);

    let _ = writeln!(
        o,
        "## Mixed precision\n\n\
         The table's *saved for backward* column of two runs of each config, one in fp32 \
         (`--autocast off`) and one under CPU bf16 autocast (`--autocast bf16`); the README's \
         *Mixed precision* says why not every policy's bytes halve. The block reports after \
         each table (*what one block keeps under ...*) show where the bytes go.\n"
    );
    let _ = writeln!(
        o,
        "Medium config (*Medium config, fp32* and *Medium config, bf16* below):\n"
    );
    o += &compare(MEDIUM_FP32.slug, MEDIUM_BF16.slug)?;
    let _ = writeln!(
        o,
        "\nSmall config (*Small config under a budget* above and *Small config under a budget, \
         bf16* below):\n"
    );
    o += &compare(SMALL_BUDGET.slug, SMALL_BF16.slug)?;
    o.push('\n');
    section(&mut o, "###", &MEDIUM_FP32);
    section(&mut o, "###", &MEDIUM_BF16);
    section(&mut o, "###", &SMALL_BF16);
    Ok(o.trim_end().to_string() + "\n")
}

/// A markdown table of the bytes saved for backward per policy in the runs
/// `fp32` and `bf16` (their `summary.tsv`, the table's numbers in bytes).
fn compare(fp32: &str, bf16: &str) -> Result<String> {
    let (a, b) = (saved_bytes(fp32)?, saved_bytes(bf16)?);
    let mut o = String::from(
        "| policy | saved for backward, fp32 | bf16 | bf16 ÷ fp32 |\n| --- | ---: | ---: | ---: |\n",
    );
    for (policy, x) in &a {
        let Some((_, y)) = b.iter().find(|(p, _)| p == policy) else {
            continue;
        };
        let _ = writeln!(
            o,
            "| `{policy}` | {} | {} | {:.2} |",
            bytes(*x),
            bytes(*y),
            *y as f64 / *x as f64
        );
    }
    Ok(o)
}

/// The bytes saved for backward of each policy of the run `slug`.
fn saved_bytes(slug: &str) -> Result<Vec<(String, u64)>> {
    let path = repo_root()
        .join("target")
        .join("training_example")
        .join(slug)
        .join("summary.tsv");
    let text =
        fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut header = text.lines().next().unwrap_or("").split('\t');
    let column = header
        .position(|c| c == "saved_for_backward")
        .ok_or_else(|| format!("{} has no saved_for_backward column", path.display()))?;
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let value = fields.get(column).and_then(|v| v.parse().ok());
            match (fields.first(), value) {
                (Some(policy), Some(value)) => Ok((policy.to_string(), value)),
                _ => Err(format!("{}: cannot read the line {line:?}", path.display())),
            }
        })
        .collect()
}

/// Bytes in KiB below a MiB, else in MiB, with two decimals.
fn bytes(n: u64) -> String {
    let n = n as f64;
    if n < 1024.0 * 1024.0 {
        format!("{:.2} KiB", n / 1024.0)
    } else {
        format!("{:.2} MiB", n / (1024.0 * 1024.0))
    }
}

/// The CPU's model name from /proc/cpuinfo.
fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The first line a command prints, or `unknown`.
fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The tch version the training example's lock file holds.
fn locked_tch() -> Option<String> {
    let lock = repo_root()
        .join("examples")
        .join("train_gpt")
        .join("Cargo.lock");
    locked_versions(&fs::read_to_string(lock).ok()?, "tch")
        .into_iter()
        .next()
}

/// Today's date (UTC) as `YYYY-MM-DD`.
fn today() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a count of days since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_000), (2024, 10, 4));
    }

    #[test]
    fn output_cleaned() {
        assert_eq!(strip_ansi("\u{1b}[32mok\u{1b}[0m done"), "ok done");
        assert_eq!(clean("a\rb\n\nc  \n"), "b\n\nc");
    }
}
