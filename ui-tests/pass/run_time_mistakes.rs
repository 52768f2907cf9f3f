// Adversarial round three (ui-tests/README.md): programs rustc accepts whose mistake only the
// runtime sees, each failing loudly, naming what went wrong:
// - a `needs` reached only during recomputation (docs/dsl.md, Y8): the
//   forward asked for nothing there, so the path check stops it at the
//   mark (docs/semantics.md R11, error E36), naming the mark and where;
// - a marked save output changed in place after it was kept: served, it
//   is refused (docs/semantics.md P2, error E12);
// - a save output kept past its checkpoint run in a `thread_local!`
//   (`Saved` is not `Send`, but a thread-local needs no `Send`): the value
//   recomputation left there is a placeholder, and marking it later keeps
//   nothing, so reading it fails, after backward or during another
//   checkpoint's recomputation (a hole in the types, found by
//   the third adversarial round);
// - the runtime API's untyped `Region::call` (kept for run-time policies
//   and old code) with `Policy::Save`: its output is a plain tensor, which
//   bare code reads unasked (the typed call is `call_saved`);
// - forward-only code (`on_forward()`) whose value flows into the output:
//   recomputation computes something else, which strict recomputation does
//   not see (the gradients are silently those of the fallback) and
//   `determinism = Bitwise` does.
use remat::{checkpoint, is_recomputing, needs, region, remat, Policy, Saved};
use std::cell::RefCell;
use tch::{Device, Kind, Tensor};

fn attention(h: &Tensor) -> Tensor {
    h * 2
}

#[checkpoint(strict = true)]
fn replay_only_needs(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    if is_recomputing() {
        let _ = needs(&a).sum(Kind::Float).double_value(&[]);
    }
    x * x
}

#[checkpoint(strict = true)]
fn in_place_after_needs(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let mut a = needs(a);
    a += 1.0;
    &a * x
}

thread_local! {
    static LAST_ATTENTION: RefCell<Option<Saved<Tensor>>> = const { RefCell::new(None) };
}

/// Keeps its latest attention for a later look; recomputation runs this
/// line too, and leaves its own (placeholder) value there.
#[checkpoint(strict = true)]
fn keeps_its_attention(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    LAST_ATTENTION.with(|last| *last.borrow_mut() = Some(a));
    x * x
}

#[checkpoint(strict = true)]
fn untyped_region_call(x: &Tensor) -> Tensor {
    let a = region("attention", Policy::Save).call(x, attention);
    a.exp() * x
}

/// Reads what the last checkpoint run left in `LAST_ATTENTION`: nothing on
/// its forward, and, on its recomputation, what `keeps_its_attention`'s
/// recomputation (which backward runs first) left there.
#[checkpoint(strict = true)]
fn reads_the_last_attention(x: &Tensor) -> Tensor {
    match LAST_ATTENTION.with(|last| last.borrow_mut().take()) {
        Some(a) => x * needs(a),
        None => x * x.ones_like(),
    }
}

#[checkpoint(strict = true, determinism = Bitwise)]
fn on_forward_fallback(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let a = a.on_forward().unwrap_or_else(|| x.zeros_like());
    x * a
}

fn input() -> Tensor {
    Tensor::randn([4], (Kind::Float, Device::Cpu)).set_requires_grad(true)
}

fn backward_error(y: Tensor) -> String {
    y.sum(Kind::Float).f_backward().unwrap_err().to_string()
}

fn main() {
    let err = backward_error(replay_only_needs(&input()));
    assert!(
        err.contains("recomputation left its forward's path")
            && err.contains("marked `replay_only_needs::attention.out` with `needs` at")
            && err.contains("where its forward asked for no such output"),
        "{err}"
    );

    let err = backward_error(in_place_after_needs(&input()));
    assert!(err.contains("modified in place after it was kept"), "{err}");

    let x = input();
    keeps_its_attention(&x).sum(Kind::Float).backward();
    let last = LAST_ATTENTION
        .with(|last| last.borrow_mut().take())
        .unwrap();
    // `needs` refuses to hand the placeholder over, naming it.
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| needs(last)))
        .map(|_| ())
        .unwrap_err();
    let err = err
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(err.contains("`needs` was handed a placeholder"), "{err}");
    assert!(
        err.contains("`keeps_its_attention::attention.out` is a placeholder"),
        "{err}"
    );

    let x = input();
    let y = keeps_its_attention(&reads_the_last_attention(&x));
    let err = backward_error(y);
    assert!(
        err.contains("checkpoint `reads_the_last_attention`: replay failed"),
        "{err}"
    );
    assert!(err.contains("`needs` was handed a placeholder"), "{err}");
    assert!(
        err.contains("`keeps_its_attention::attention.out` is a placeholder"),
        "{err}"
    );

    let err = backward_error(untyped_region_call(&input()));
    assert!(
        err.contains("`untyped_region_call::attention.out` is a placeholder"),
        "{err}"
    );

    let x = input();
    let err = backward_error(on_forward_fallback(&x));
    assert!(
        err.contains("has other values on replay than on the forward"),
        "{err}"
    );
}
