// Adversarial round three (ui-tests/README.md): a save output given to a nested checkpoint. A
// runtime-API checkpoint's closure cannot capture it (`Saved` is not
// `Send`), nor take it as an input (`&Saved<Tensor>` is no checkpoint
// input), a `#[checkpoint]` function taking `&Tensor` does not take it,
// and one declaring a `&Saved<Tensor>` parameter cannot capture it. (A
// checkpoint returning a `Vec` of save outputs inside a tuple, once refused
// here, is accepted now: ui-tests/pass/safe_reads.rs,
// `returns_a_vec_in_a_tuple`.) Fix: `needs` it first, then give the
// nested checkpoint the tensor (ui-tests/pass/fixes_more.rs,
// `nested_checkpoints`).
use remat::{checkpoint, needs, remat, Saved};
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

fn main() {}
