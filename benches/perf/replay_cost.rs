//! Section 5 of docs/performance.md: where a recomputation's time goes in
//! the medium reference model, written by every `cargo xtask bench`. What
//! each policy's recomputation skips after its last save (the ops that ran
//! dry, `remat::diagnostics::dry_ops`), what that saves (remat with early
//! stop on, its default, and off, against `torch.utils.checkpoint` and the
//! plain model, interleaved round by round), and what remat's replay adds
//! per op of the closure (the stop's dispatcher fallback), timed on a chain
//! of one-element ops where that cost is all there is.

use crate::python::Worker;
use crate::rust_side::{policy_name, step};
use crate::stats::{ratios, summary, Summary};
use crate::timed_on_side;
use remat::diagnostics::dry_ops;
use remat::{checkpoint, Checkpoint};
use remat_reference::model::{ModelPolicy, Setup, MEDIUM};
use std::fmt::Write;
use std::time::Instant;
use tch::{Kind, Tensor};

const MEASURED: [ModelPolicy; 3] = [
    ModelPolicy::Full,
    ModelPolicy::Selective,
    ModelPolicy::SaveMlp,
];

/// Ops in the chain of the per-op cost.
const CHAIN: usize = 200;

/// One variant of the interleaved rounds.
#[derive(Clone, Copy, PartialEq)]
enum Variant {
    /// remat's plain model.
    None,
    /// remat under a policy, early stop on or off.
    Remat(ModelPolicy, bool),
    /// `torch.utils.checkpoint` under a policy (`None`: the plain model).
    Torch(ModelPolicy),
}

/// Measures the section and returns it as markdown.
pub fn section(rounds: usize, worker: &mut Worker) -> Result<String, String> {
    let setup = Setup::on(MEDIUM, crate::device());
    let tails = tails(&setup);
    let times = steps(&setup, rounds, worker)?;
    let per_op = per_op(rounds);
    Checkpoint::set_default_early_stop(true);
    Ok(render(rounds, &tails, &times, per_op))
}

/// The ops one block's recomputation ran dry under each policy.
fn tails(setup: &Setup) -> Vec<(ModelPolicy, Vec<String>)> {
    Checkpoint::set_default_early_stop(true);
    MEASURED
        .iter()
        .map(|&p| {
            setup.model.zero_grad();
            let loss = setup.loss(p);
            let ((), names) = dry_ops(|| loss.backward());
            // Every block is the same code, so each recomputation runs the
            // same ops dry: one block's share.
            let per_block = names.len() / MEDIUM.l as usize;
            let names = names
                .into_iter()
                .take(per_block)
                .map(|n| n.trim_start_matches("aten::").to_string())
                .collect();
            (p, names)
        })
        .collect()
}

/// Seconds per round of every variant, interleaved (the order rotates; a
/// first round is untimed; a pause and an untimed step at each switch of
/// process, as in section 1).
fn steps(
    setup: &Setup,
    rounds: usize,
    worker: &mut Worker,
) -> Result<Vec<(Variant, Vec<f64>)>, String> {
    let mut variants = vec![Variant::None, Variant::Torch(ModelPolicy::None)];
    for p in MEASURED {
        variants.extend([
            Variant::Remat(p, true),
            Variant::Remat(p, false),
            Variant::Torch(p),
        ]);
    }
    let mut times: Vec<(Variant, Vec<f64>)> = variants.iter().map(|&v| (v, Vec::new())).collect();
    let started = Instant::now();
    for round in 0..=rounds {
        let mut order = variants.clone();
        let n = order.len();
        order.rotate_left(round % n);
        let mut last_side = None;
        for v in order {
            let rust = !matches!(v, Variant::Torch(_));
            let secs = timed_on_side(&mut last_side, rust, || match v {
                Variant::None => Ok(step(setup, ModelPolicy::None).0),
                Variant::Remat(p, on) => {
                    Checkpoint::set_default_early_stop(on);
                    Ok(step(setup, p).0)
                }
                Variant::Torch(p) => Ok(worker.step("medium", "torch", policy_name(p))?.0),
            })?;
            if round > 0 {
                let slot = times.iter_mut().find(|(w, _)| *w == v).expect("a variant");
                slot.1.push(secs);
            }
        }
        eprintln!(
            "bench: recomputation's time, round {round}/{rounds} ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(times)
}

/// The per-op cost of a replay with the stop armed: a checkpoint around
/// [`CHAIN`] `sin` on one element (each saves its input, so the stop is
/// the last op's), early stop on against off, each round's value the least
/// of 9 runs, alternating run by run. Microseconds per op, median (IQR).
fn per_op(rounds: usize) -> Summary {
    let run = |on: bool| {
        let x = Tensor::from_slice(&[0.5f32]).set_requires_grad(true);
        let y = checkpoint("chain").early_stop(on).call(&x, |x| {
            let mut h = x;
            for _ in 0..CHAIN {
                h = h.sin();
            }
            h
        });
        let loss = y.sum(Kind::Float);
        let start = Instant::now();
        loss.backward();
        start.elapsed().as_secs_f64()
    };
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..=rounds {
        let (mut best_on, mut best_off) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..9 {
            best_on = best_on.min(run(true));
            best_off = best_off.min(run(false));
        }
        on.push(best_on);
        off.push(best_off);
    }
    // The first round warms up.
    let per_op: Vec<f64> = on[1..]
        .iter()
        .zip(&off[1..])
        .map(|(a, b)| (a - b) / CHAIN as f64 * 1e6)
        .collect();
    summary(&per_op)
}

fn render(
    rounds: usize,
    tails: &[(ModelPolicy, Vec<String>)],
    times: &[(Variant, Vec<f64>)],
    per_op: Summary,
) -> String {
    let of = |v: Variant| &times.iter().find(|(w, _)| *w == v).expect("measured").1;
    let ms = |v: &[f64]| {
        let s = summary(v);
        format!(
            "{:.1} ms ({:.1}–{:.1})",
            s.median * 1e3,
            s.q1 * 1e3,
            s.q3 * 1e3
        )
    };
    let ratio = |s: Summary| format!("{:.3} ({:.3}–{:.3})", s.median, s.q1, s.q3);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\n## 5. Where recomputation's time goes\n\n\
         The medium reference model on one thread, {rounds} rounds of every variant interleaved as in \
         section 1 (a rotating order, an untimed first round, a pause and an untimed step at each \
         switch of process). remat runs with early stop on (its default: docs/semantics.md, rule \
         C17) and off; `torch.utils.checkpoint` with its own default, on. *Tail* is what one \
         block's recomputation ran dry (`remat::diagnostics::dry_ops` around a backward): the op \
         whose save completed the rebuild and every later op computed from it. *Saved* is off − \
         on per round, and its share of the replay is (off − on) ÷ (off − `none`), where `none` is \
         remat's plain model in the same round.\n"
    );
    let _ = writeln!(
        o,
        "| policy | tail (one block) | remat, on | remat, off | torch.utils.checkpoint | on ÷ off | saved, share of the replay | remat on ÷ `none` | torch ÷ its `none` | remat on ÷ torch |"
    );
    let _ = writeln!(
        o,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let none = of(Variant::None);
    let torch_none = of(Variant::Torch(ModelPolicy::None));
    for (p, tail) in tails {
        let (on, off, torch) = (
            of(Variant::Remat(*p, true)),
            of(Variant::Remat(*p, false)),
            of(Variant::Torch(*p)),
        );
        let share: Vec<f64> = on
            .iter()
            .zip(off)
            .zip(none)
            .map(|((a, b), n)| (b - a) / (b - n))
            .collect();
        let tail = if tail.is_empty() {
            "nothing".to_string()
        } else {
            tail.iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            o,
            "| `{}` | {tail} | {} | {} | {} | {} | {} | {} | {} | {} |",
            policy_name(*p),
            ms(on),
            ms(off),
            ms(torch),
            ratio(summary(&ratios(on, off))),
            ratio(summary(&share)),
            ratio(summary(&ratios(on, none))),
            ratio(summary(&ratios(torch, torch_none))),
            ratio(summary(&ratios(on, torch))),
        );
    }
    let _ = writeln!(
        o,
        "\n`none`: remat {}, torch {} (the same plain model on both sides).\n\n\
         **What the replay adds per op.** While a recomputation may stop, its last ops (from the \
         save before the first one the stopping op can make, which the forward counted) pass \
         through the stop's dispatcher fallback (csrc/early_stop.cpp: their arguments boxed and \
         kept until the op returns, so that the op can run dry if its save stops the \
         recomputation); the ops before them do not. Measured on a checkpoint around {CHAIN} \
         `sin` on one element, whose backward recomputes all of them: (backward with early stop \
         on − off) ÷ {CHAIN}, each round's value the least of 9 runs of each, alternating: \
         **{:.2} µs ({:.2}–{:.2}) per op of the replay**. \
         The other costs of remat's replay (holders, the metadata and path checks, the kept \
         random state) are measured in sections 3 and 8.\n",
        ms(none),
        ms(torch_none),
        per_op.median,
        per_op.q1,
        per_op.q3
    );
    o
}
