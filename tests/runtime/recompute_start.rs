//! A user's saved-tensor pair hears that a checkpoint starts to recompute
//! before any of its saves is unpacked (docs/semantics.md, rule T9): an
//! offloader that keeps each checkpoint's saves in a group and brings the
//! group back in bulk at that point sees no unpack before its group is
//! back, although backward reaches a `save` region's kept saves before
//! anything recomputes; once per checkpoint and backward, again under
//! `retain_graph`, and also for a checkpoint with nothing to recompute.

use crate::common::{assert_bitwise, input};
use remat::autograd::backward_with;
use remat::{
    autograd::RecomputeStart, checkpoint, current_saved_tensor_info, recompute_needs_tensor,
    region, Policy, SavedTensorKind, TensorHooks,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tch::{Kind, Tensor};

thread_local! {
    /// The group new saves go to: the block the model runs.
    static GROUP: RefCell<String> = const { RefCell::new(String::new()) };
}

enum Held {
    Kept(Tensor),
    Grouped(String, usize),
}

#[derive(Default)]
struct Group {
    tensors: Vec<Tensor>,
    back: bool,
}

/// Offloads into groups, and brings a group back when its checkpoint
/// starts to recompute; an unpack from a group not back fails.
fn offloader(told: Arc<AtomicUsize>) -> TensorHooks {
    let groups: Arc<Mutex<HashMap<String, Group>>> = Arc::default();
    let (pack_groups, unpack_groups, start_groups) = (groups.clone(), groups.clone(), groups);
    TensorHooks::with_capture(
        move |t: Tensor| {
            let info = current_saved_tensor_info().expect("packed by remat");
            // Checkpoint inputs stay where they are, as offloaders do.
            if info.kind == SavedTensorKind::CheckpointInput {
                return Held::Kept(t);
            }
            let group = info
                .context
                .and_then(|c| c.downcast_ref::<String>().cloned())
                .expect("a group for what a checkpoint keeps");
            let mut groups = pack_groups.lock().unwrap();
            let g = groups.entry(group.clone()).or_default();
            g.back = false;
            g.tensors.push(t.copy()); // "moved away"
            Held::Grouped(group, g.tensors.len() - 1)
        },
        move |held: &Held| match held {
            Held::Kept(t) => t.shallow_clone(),
            Held::Grouped(group, i) => {
                let groups = unpack_groups.lock().unwrap();
                let g = &groups[group];
                assert!(g.back, "unpacked before its group `{group}` was onloaded");
                g.tensors[*i].shallow_clone()
            }
        },
        || GROUP.with(|g| g.borrow().clone()),
    )
    .on_recompute(move |start: &RecomputeStart| {
        let group = start
            .context
            .as_ref()
            .and_then(|c| c.downcast_ref::<String>().cloned())
            .expect("the context captured at the checkpoint's start");
        assert_eq!(start.checkpoint.as_deref(), Some(group.as_str()));
        if let Some(g) = start_groups.lock().unwrap().get_mut(&group) {
            g.back = true;
        }
        told.fetch_add(1, SeqCst);
    })
}

/// Two blocks, each a `recompute` region then a `save` region whose saves
/// the offloader holds: backward reaches those kept saves first.
fn model(x: &Tensor, hooks: Option<&TensorHooks>) -> Tensor {
    let mut h = x.shallow_clone();
    for i in 0..2 {
        let name = format!("layers.{i}");
        GROUP.with(|g| *g.borrow_mut() = name.clone());
        let ckpt = checkpoint(name).enabled(hooks.is_some());
        let ckpt = match hooks {
            Some(hooks) => ckpt.saved_tensors_hooks(hooks.clone()),
            None => ckpt,
        };
        h = ckpt.call(&h, |h| {
            let a = region("attention", Policy::Recompute).call(&h, |h| h.sin() * h);
            let m = region("mlp", Policy::Save).call(&a, |a| a.exp().tanh());
            recompute_needs_tensor(&m);
            m
        });
    }
    h
}

#[test]
// docs/semantics.md, rule T9.
fn a_bulk_onload_when_recomputation_starts_comes_before_every_unpack() {
    let plain = {
        let x = input();
        model(&x, None).sum(Kind::Float).backward();
        x.grad()
    };
    let told = Arc::new(AtomicUsize::new(0));
    let hooks = offloader(told.clone());
    let x = input();
    let loss = model(&x, Some(&hooks)).sum(Kind::Float);
    backward_with(&loss, true).expect("no unpack before its group is back");
    assert_bitwise(&x.grad(), &plain, "offloaded in groups");
    assert_eq!(told.load(SeqCst), 2, "once per checkpoint");
    // A retained graph's second backward is told again.
    backward_with(&loss, false).expect("the second backward");
    assert_eq!(told.load(SeqCst), 4);
}

#[test]
// docs/semantics.md, rules T9 and C7: a checkpoint whose only saves are a
// `save` region's recomputes nothing, and its pair is told all the same.
fn a_checkpoint_with_nothing_to_recompute_is_told_too() {
    let told = Arc::new(AtomicUsize::new(0));
    let hooks = offloader(told.clone());
    let runs = Arc::new(AtomicUsize::new(0));
    let run = |on: bool| {
        let x = input();
        GROUP.with(|g| *g.borrow_mut() = "only".into());
        let r = runs.clone();
        let y = checkpoint("only")
            .enabled(on)
            .saved_tensors_hooks(hooks.clone())
            .call(&x, move |x| {
                r.fetch_add(1, SeqCst);
                region("body", Policy::Save).call(&x, |x| x.exp().tanh())
            });
        y.sum(Kind::Float).backward();
        x.grad()
    };
    let plain = run(false);
    runs.store(0, SeqCst);
    let got = run(true);
    assert_eq!(runs.load(SeqCst), 1, "the closure is not run again");
    assert_eq!(told.load(SeqCst), 1);
    assert_bitwise(&got, &plain, "gradient");
}

#[test]
// docs/semantics.md, rule T9: a panic in the callback fails the backward.
fn a_failing_recompute_start_fails_the_backward() {
    let hooks = TensorHooks::new(|t: Tensor| t, |t: &Tensor| t.shallow_clone())
        .on_recompute(|_| panic!("onload failed"));
    let x = input();
    let y = checkpoint("c")
        .saved_tensors_hooks(hooks)
        .call(&x, |x| x.sin() * 2.0);
    let err = backward_with(&y.sum(Kind::Float), false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "checkpoint `c`: the saved-tensor hooks' recomputation start panicked: onload failed"
        ),
        "{err}"
    );
}
