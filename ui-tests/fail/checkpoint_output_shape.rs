// A checkpoint returns tensors, save outputs, and tuples and `Vec`s of
// them nested to any depth (docs/semantics.md, rule C10); anything else,
// here an `Rc`, is refused at the call with the shapes it takes.
use remat::checkpoint;
use std::rc::Rc;
use tch::Tensor;

fn shared_output(x: &Tensor) -> Tensor {
    let (h, shared) = checkpoint("c").call(x, |x| (x.sin(), Rc::new(x.cos())));
    h + &*shared
}

fn main() {}
