//! A kept `Save` output comes back as the forward computed it (docs/
//! semantics.md, rule K7): a dense strided output is kept as its storage
//! and version counter and served as a tensor made over that storage with
//! the output's recorded layout, so the layout must come back whole
//! (strides, offset, dtype); an output that such a tensor would not
//! reproduce (a negative or conjugate bit) stays a detached alias.

use crate::common::assert_bitwise;
use crate::ways::values;
use remat::{checkpoint, is_recomputing, needs, region, Policy};
use std::sync::{Arc, Mutex};
use tch::{Kind, Tensor};

/// What the consumer saw of the value it received, on the forward and on
/// the replay: sizes, strides, storage offset, dtype, negative bit.
type Seen = (Vec<i64>, Vec<i64>, i64, Kind, bool);

fn seen(t: &Tensor) -> Seen {
    (
        t.size(),
        t.stride(),
        t.storage_offset(),
        t.kind(),
        t.is_neg(),
    )
}

/// `make` as a `Save` region's output, read by a `Recompute` region that
/// asks for it, in a checkpoint; the input's gradient, and what the
/// consumer saw on the forward and on the replay.
fn checkpointed(make: fn(&Tensor) -> Tensor) -> (Tensor, Vec<(bool, Seen)>) {
    let x = values(12, 0.3).view([3, 4]).set_requires_grad(true);
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen_by = log.clone();
    let y = checkpoint("kept").call(&x, move |x| {
        let out = region("make", Policy::Save).call_saved(&x, make);
        let out = needs(out);
        let log = seen_by.clone();
        region("use", Policy::Recompute).call(&out, move |v| {
            log.lock().unwrap().push((is_recomputing(), seen(v)));
            (v.to_kind(Kind::Float) * 3).sin()
        })
    });
    y.sum(Kind::Float).backward();
    let log = log.lock().unwrap().clone();
    (x.grad(), log)
}

fn plain(make: fn(&Tensor) -> Tensor) -> Tensor {
    let x = values(12, 0.3).view([3, 4]).set_requires_grad(true);
    let v = make(&x);
    (v.to_kind(Kind::Float) * 3)
        .sin()
        .sum(Kind::Float)
        .backward();
    x.grad()
}

fn check(what: &str, make: fn(&Tensor) -> Tensor) {
    let (grad, log) = checkpointed(make);
    assert_bitwise(&grad, &plain(make), what);
    let forward: Vec<_> = log.iter().filter(|(r, _)| !r).collect();
    let replay: Vec<_> = log.iter().filter(|(r, _)| *r).collect();
    assert_eq!((forward.len(), replay.len()), (1, 1), "{what}: {log:?}");
    assert_eq!(
        forward[0].1, replay[0].1,
        "{what}: served otherwise than computed"
    );
}

#[test]
// docs/semantics.md, rules K7 and S10: strides, offset and dtype.
fn a_kept_output_is_served_with_the_layout_it_was_computed_with() {
    check("contiguous", |x| x * 2.0);
    check("transposed", |x| (x * 2.0).transpose(0, 1));
    check("offset", |x| (x * 2.0).narrow(1, 1, 2));
    check("broadcast", |x| {
        (x * 2.0).narrow(0, 1, 1).expand([5, 4], false)
    });
    check("double", |x| (x * 2.0).to_kind(Kind::Double));
}

#[test]
// docs/semantics.md, rule K7: a tensor over the storage would drop the
// negative bit (and flip the values); such an output stays an alias.
fn a_kept_output_with_a_negative_bit_is_served_with_it() {
    check("negative view", |x| (x * 2.0).internal_neg_view());
}

#[test]
// docs/semantics.md, rule P2 (E12): the version counter is kept with the
// storage: a change through another view of it after the ask is seen.
fn a_kept_output_changed_through_a_view_after_the_ask_fails_replay() {
    let x = values(8, 0.1).set_requires_grad(true);
    let y = checkpoint("changed").call(&x, |x| {
        let out = region("make", Policy::Save).call_saved(&x, |x| (x * 2.0).exp());
        let out = needs(out);
        let z = region("use", Policy::Recompute).call(&out, |v| v.sin());
        if !is_recomputing() {
            // A view that outlives nothing but shares the counter.
            let _ = out.detach().narrow(0, 0, 2).g_add_scalar_(1.0);
        }
        z
    });
    let err = y
        .sum(Kind::Float)
        .f_backward()
        .expect_err("replay must fail");
    let message = err.to_string();
    assert!(
        message.contains("changed::make")
            && message.contains("modified in place after it was kept"),
        "{message}"
    );
}
