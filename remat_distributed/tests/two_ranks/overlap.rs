//! Communication overlaps backward, and each parameter reports its
//! gradient once per backward, replays included (docs/semantics.md, rules
//! W6, W9): a ResNet whose input requires grad, so that the last gradient
//! autograd computes is the input's, watched through the bridge.

use crate::launch::launch_both;
use remat_distributed::{DdpOptions, DistributedDataParallel, ProcessGroup};
use remat_reference::resnet::{batch, Mode, ResNet};
use std::time::Duration;

/// The blocks' mode, and whether the graph is declared static: a static
/// graph's first backward reduces every bucket only when it ends (W7),
/// which shows the watch does see a backward without overlap.
const MODES: [(&str, Mode, bool); 4] = [
    ("plain", Mode::Plain, false),
    ("whole", Mode::Whole, false),
    ("save_stem", Mode::SaveStem, false),
    ("static_whole", Mode::Whole, true),
];

/// One rank: two steps per mode; after each, the buckets launched before
/// the input's gradient was computed, all buckets launched, and each
/// parameter's reports.
pub fn rank_main() {
    let group = ProcessGroup::from_env().unwrap();
    let rank = group.rank() as i64;
    for (name, mode, static_graph) in MODES {
        let vs = remat::nn::VarStore::new(tch::Device::Cpu);
        let model = ResNet::new(&vs.root(), 16, 4, 10);
        // Small buckets: a conv's weight is 9 KiB, so there are several.
        let opts = DdpOptions {
            first_bucket_bytes: 8 << 10,
            bucket_bytes: 16 << 10,
            static_graph,
            ..DdpOptions::default()
        };
        let ddp = DistributedDataParallel::from_var_store(&group, &vs, opts).unwrap();
        let buckets = ddp.buckets().unwrap().len();
        let (images, labels) = batch();
        for step in 0..2 {
            let x = images.narrow(0, rank * 4, 4).copy().set_requires_grad(true);
            let y = labels.narrow(0, rank * 4, 4);
            ddp.watch(&x).unwrap();
            let loss = ddp
                .forward(|| model.forward(&x, mode).cross_entropy_for_logits(&y))
                .unwrap();
            loss.backward();
            let stats = ddp.last_backward().unwrap();
            let done = stats.launches.iter().all(|b| b.completed.is_some());
            println!(
                "OVERLAP {name} {step}: buckets={buckets} launched={} completed={done} \
                 watched={:?} reports={:?}",
                stats.launches.len(),
                stats.watched,
                stats.reports
            );
        }
    }
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let at = line
        .find(key)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + key.len();
    line[at..].split_whitespace().next().unwrap()
}

/// docs/semantics.md, rules W6, W9: when autograd computes the input's
/// gradient, the last of the backward, at least one bucket's all-reduce
/// has been launched already (it fails if buckets only fired when backward
/// ended, as in a static graph's first backward, which is checked to read
/// 0), under no checkpoints, whole-block replays and save regions; and
/// every parameter reported its gradient exactly once.
#[test]
fn buckets_are_reduced_while_backward_runs_and_each_gradient_is_reported_once() {
    let (dir, runs) = launch_both("overlap", Duration::from_secs(120));
    for (rank, run) in runs.iter().enumerate() {
        let lines: Vec<&str> = run
            .output
            .lines()
            .filter_map(|l| l.find("OVERLAP ").map(|at| &l[at..]))
            .collect();
        assert_eq!(lines.len(), 2 * MODES.len(), "rank {rank}:\n{}", run.output);
        for line in lines {
            let buckets: usize = field(line, "buckets=").parse().unwrap();
            assert!(buckets > 2, "{line}");
            assert_eq!(field(line, "launched="), buckets.to_string(), "{line}");
            assert_eq!(field(line, "completed="), "true", "{line}");
            let watched = field(line, "watched=");
            let before: usize = watched
                .trim_matches(|c| c == '[' || c == ']')
                .parse()
                .unwrap_or_else(|_| panic!("one watched gradient expected: {line}"));
            if line.starts_with("OVERLAP static_whole 0:") {
                assert_eq!(before, 0, "{line}");
            } else {
                assert!(
                    before >= 1,
                    "no bucket was launched before the input's gradient: {line}"
                );
            }
            let reports = &line[line.find("reports=").unwrap() + 8..];
            let counts: Vec<&str> = reports
                .trim_matches(|c| c == '[' || c == ']')
                .split(", ")
                .collect();
            assert!(counts.len() > 10, "{line}");
            assert!(counts.iter().all(|c| *c == "1"), "{line}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
