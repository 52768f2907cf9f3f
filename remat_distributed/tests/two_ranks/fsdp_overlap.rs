//! A unit's gather is issued while the unit before it computes, in forward
//! and in backward, and runs on c10d's thread meanwhile (docs/semantics.md,
//! rule F7).

use crate::launch::launch_both;
use crate::sharded_model::{shard, sharded_loss};
use remat_distributed::{FsdpEventKind, FsdpOptions, ProcessGroup};
use remat_reference::model::{batch, Config, ModelPolicy, Setup, MEDIUM};
use std::time::Duration;

const CFG: Config = Config {
    b: 2,
    t: 256,
    ..MEDIUM
};

/// One rank: two steps with and without prefetch; the second step's
/// prefetches, printed.
pub fn rank_main() {
    let group = ProcessGroup::from_env().unwrap();
    let (tokens, targets) = batch(CFG, 1);
    for prefetch in [true, false] {
        let s = Setup::new(CFG);
        let options = FsdpOptions {
            prefetch,
            ..FsdpOptions::default()
        };
        let fsdp = shard(&group, &s.model, options);
        for _ in 0..2 {
            let loss = sharded_loss(&fsdp, &s.model, (&tokens, &targets), ModelPolicy::Full);
            fsdp.backward(&loss).unwrap();
        }
        let stats = fsdp.last_step().unwrap();
        let show = |pairs: Vec<(String, String)>| {
            pairs
                .iter()
                .map(|(p, c)| format!("{p}<{c}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        // Gathers that completed while the unit before them still
        // computed: before its forward ended, or (in backward) before it
        // launched its reduce-scatter.
        let at = |kind, i: i64| stats.first(kind, &format!("layers.{i}"));
        let overlapped = (1..CFG.l)
            .filter(|&i| {
                matches!(
                    (at(FsdpEventKind::GatherDone, i), at(FsdpEventKind::ForwardEnd, i - 1)),
                    (Some(done), Some(end)) if done < end
                )
            })
            .count()
            + (0..CFG.l - 1)
                .filter(|&i| {
                    let done = stats
                        .events
                        .iter()
                        .filter(|e| e.kind == FsdpEventKind::GatherDone)
                        .rfind(|e| e.unit == format!("layers.{i}"))
                        .map(|e| e.at);
                    matches!(
                        (done, at(FsdpEventKind::ReduceLaunch, i + 1)),
                        (Some(done), Some(end)) if done < end
                    )
                })
                .count();
        println!(
            "PREFETCH={prefetch} forward=[{}] backward=[{}] overlapped={overlapped}",
            show(stats.prefetched_in_forward()),
            show(stats.prefetched_in_backward())
        );
        group.barrier().unwrap();
    }
}

/// docs/semantics.md, rule F7.
#[test]
fn the_next_units_gather_overlaps_the_current_units_compute() {
    let (_, runs) = launch_both("fsdp_overlap", Duration::from_secs(180));
    for (rank, run) in runs.iter().enumerate() {
        let line = |prefetch: bool| {
            let key = format!("PREFETCH={prefetch} ");
            run.output
                .lines()
                .find_map(|l| l.find(key.as_str()).map(|at| l[at..].to_string()))
                .unwrap_or_else(|| panic!("rank {rank} printed no {key}:\n{}", run.output))
        };
        let on = line(true);
        println!("rank {rank}: {on}");
        // Forward: each block's gather starts during the forward of the
        // unit that ran before it (the root's, for the first block).
        let mut forward = vec!["layers.0<root".to_string()];
        forward.extend((1..CFG.l).map(|i| format!("layers.{i}<layers.{}", i - 1)));
        assert!(
            on.contains(&format!("forward=[{}]", forward.join(","))),
            "rank {rank}: {on}"
        );
        // Backward: each block's gather starts during the backward of the
        // block after it (the last block's, during the root's).
        let mut backward = vec![format!("layers.{}<root", CFG.l - 1)];
        backward.extend(
            (0..CFG.l - 1)
                .rev()
                .map(|i| format!("layers.{i}<layers.{}", i + 1)),
        );
        assert!(
            on.contains(&format!("backward=[{}]", backward.join(","))),
            "rank {rank}: {on}"
        );
        // Prefetched gathers finished while the unit before computed: they
        // ran on c10d's thread meanwhile.
        let early: usize = on
            .rsplit("overlapped=")
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            early >= 1,
            "rank {rank}: no gather overlapped compute: {on}"
        );
        let off = line(false);
        assert!(
            off.contains("forward=[] backward=[] overlapped=0"),
            "rank {rank}, no prefetch: {off}"
        );
    }
}
