// Adversarial round three (ui-tests/README.md): a save output given to a nested checkpoint. A
// runtime-API checkpoint's closure cannot capture it (`Saved` is not
// `Send`), nor take it as an input (`&Saved<Tensor>` is no checkpoint
// input), a `#[checkpoint]` function taking `&Tensor` does not take it,
// and one declaring a `&Saved<Tensor>` parameter cannot capture it. A
// checkpoint returns save outputs in the shapes regions return them only
// (not a `Vec` inside a tuple). Fix: `needs` it first, then give the
// nested checkpoint the tensor (ui-tests/pass/round3_fixes_more.rs,
// `nested_checkpoints`).
use remat::{checkpoint, needs, region, remat, Policy, Saved};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn inner(h: &Tensor) -> Tensor {
    h.sin()
}

#[checkpoint]
fn captured_by_a_runtime_checkpoint(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    checkpoint("inner").call(x, move |x| x * 2 + a.numel() as f64)
}

#[checkpoint]
fn input_of_a_runtime_checkpoint(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    checkpoint("inner").call(&a, |a: Tensor| a.sin())
}

#[checkpoint]
fn argument_of_a_checkpoint_function(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    inner(&a)
}

#[checkpoint]
fn takes_a_save_output(a: &Saved<Tensor>) -> Tensor {
    needs(a).sin()
}

#[checkpoint]
fn returns_a_vec_in_a_tuple(x: &Tensor) -> Tensor {
    let (h, parts) = checkpoint("heads").call(x, |x| {
        let parts = region("heads", Policy::Save).call_saved(&x, |x| x.chunk(2, 0));
        (x.sin(), parts)
    });
    h + parts.len() as f64
}

fn main() {}
