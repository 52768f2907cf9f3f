//! The planner's peak contract (docs/planner.md, "The peak contract"):
//! over the reference model (small, medium, and 32 layers deep at the
//! small width), a LLaMA-style transformer, a UNet whose down blocks'
//! outputs skip to its up blocks, and a model whose blocks differ, at nine
//! kept and nine peak budgets from the least any plan needs to what the
//! model keeps with no checkpoint: glibc's heap peak during each plan's
//! backward (independent of remat's records) is within the stated
//! tolerance of the predicted peak and never above a peak budget by more,
//! kept budgets bound the predicted kept bytes, and a larger budget never
//! gets a plan predicted slower.

use crate::serial;
use remat::planner::{
    measure_levels, peak_tolerance, predict_levels, profile_with, BackwardLevels, Plan, Target,
};
use remat_reference::model::{Config, MEDIUM, SMALL};
use remat_reference::peak_contract::{sweep, table, Row};
use remat_reference::planned::mixed::Mixed;
use remat_reference::planned::transformer::{Llama, LLAMA};
use remat_reference::planned::unet::UNet;
use remat_reference::planned::{Planned, Reference};

fn holds(model: &dyn Planned) {
    let _serial = serial();
    let Some(sweep) = sweep(model, 8).unwrap() else {
        return; // not glibc: the heap does not report its bytes
    };
    let rows = sweep.rows;
    let shown = table(&rows);
    for r in &rows {
        let tolerance = peak_tolerance(r.predicted);
        assert!(
            r.error().abs() <= tolerance,
            "{}: measured peak {} against {} predicted, off by more than {tolerance}\n{shown}",
            r.model,
            r.measured,
            r.predicted
        );
        match r.target {
            Target::Peak => {
                assert!(r.predicted <= r.budget, "{shown}");
                assert!(r.measured <= r.budget + tolerance, "{shown}");
            }
            Target::Kept => assert!(r.kept <= r.budget, "{shown}"),
        }
    }
    for target in [Target::Kept, Target::Peak] {
        let sweep: Vec<&Row> = rows.iter().filter(|r| r.target == target).collect();
        assert!(sweep.len() >= 8);
        for w in sweep.windows(2) {
            assert!(w[0].budget <= w[1].budget);
            assert!(
                w[1].replay_ns <= w[0].replay_ns,
                "a larger budget got a plan predicted slower\n{shown}"
            );
        }
    }
}

#[test]
fn the_small_reference_model_keeps_the_contract() {
    holds(&Reference::new("small", SMALL));
}

#[test]
fn the_medium_reference_model_keeps_the_contract() {
    holds(&Reference::new("medium", MEDIUM));
}

/// 32 blocks, as the deep config, at the small width (the deep config
/// itself is in docs/planner.md's table, from `cargo xtask peak`).
#[test]
fn a_deep_reference_model_keeps_the_contract() {
    holds(&Reference::new("deep-narrow", Config { l: 32, ..SMALL }));
}

#[test]
fn a_llama_style_transformer_keeps_the_contract() {
    holds(&Llama::new(LLAMA));
}

#[test]
fn a_unet_with_skips_between_checkpoints_keeps_the_contract() {
    holds(&UNet::new());
}

#[test]
fn a_model_whose_blocks_differ_keeps_the_contract() {
    holds(&Mixed::new());
}

/// Every level of a plan's backward, not only its most: a UNet's down
/// blocks' outputs are alive from the forward until the backward reaches
/// the up block that takes them (and the pooling that read them), so the
/// levels inside the blocks between hold them, and the prediction says so
/// at every point of the backward, with every block whole and at half of
/// that budget.
#[test]
fn skip_tensors_count_where_they_are_alive() {
    let _serial = serial();
    let model = UNet::new();
    model.loss().backward();
    let profile = profile_with(|| model.loss(), 1).unwrap();
    if profile.backward.is_none() {
        return; // not glibc
    }
    let n = profile.layers.len();
    let whole = vec![0; n];
    let most = Plan::from_choices(&profile, &whole)
        .unwrap()
        .predicted
        .kept_bytes;
    let half = Plan::for_budget(&profile, most / 2)
        .unwrap()
        .choice_indices(&profile);
    for choices in [whole, half] {
        let plan = Plan::from_choices(&profile, &choices).unwrap();
        let predicted = predict_levels(&profile, &choices);
        let measured = measure_levels(&profile, || plan.scope(|| model.loss()))
            .unwrap()
            .unwrap();
        let pairs =
            |l: &BackwardLevels| l.layers.iter().chain(&l.gaps).copied().collect::<Vec<_>>();
        for (p, m) in pairs(&predicted).into_iter().zip(pairs(&measured)) {
            let (Some(p), Some(m)) = (p, m) else {
                assert_eq!(p.is_some(), m.is_some(), "{predicted:?}\n{measured:?}");
                continue;
            };
            assert!(
                (m - p).abs() <= peak_tolerance(p),
                "predicted {predicted:?}\nmeasured {measured:?}\n{plan}"
            );
        }
    }
}
