// Adversarial round three (ui-tests/README.md): `Option` and `Vec` outputs, and chunks. An
// `Option<Tensor>` output is an `Option<Saved<Tensor>>`, a `Vec<Tensor>`
// output a `Vec<Saved<Tensor>>`, and `chunk` of a save output gives
// `Saved<Tensor>` views: marking one chunk marks that one only (the runtime
// keeps the whole output, but the other names stay wrapped). Fix: `needs`
// each element read, or the whole `Vec` (ui-tests/pass/fixes_more.rs,
// `outputs`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn maybe(x: &Tensor, on: bool) -> Option<Tensor> {
    on.then(|| x.tanh())
}

fn heads(x: &Tensor) -> Vec<Tensor> {
    x.chunk(2, 0)
}

fn project(x: &Tensor) -> Tensor {
    x.repeat([3])
}

#[checkpoint]
fn option_output(x: &Tensor, on: bool) -> Tensor {
    remat! { let m = save maybe: maybe(x, on); }
    match m.as_ref() {
        Some(m) => m.exp(),
        None => x * 1,
    }
}

#[checkpoint]
fn vec_output(x: &Tensor) -> Tensor {
    remat! { let parts = save heads: heads(x); }
    &parts[0] * 2
}

#[checkpoint]
fn one_chunk_marked(x: &Tensor) -> Tensor {
    remat! {
        let qkv = save project: project(x);
    }
    let [q, k, v]: [_; 3] = qkv.chunk(3, 0).try_into().ok().unwrap();
    let q = remat::needs(q);
    q * k + v
}

fn main() {}
