// A parameter of a type that cannot be captured and carries an elided
// lifetime: the first error is remat's (it cannot be captured), not
// rustc's elision error on the expansion's signature (docs/dsl.md, rule U1).
use remat::checkpoint;
use tch::Tensor;

#[checkpoint]
fn scaled(x: &Tensor, cell: std::cell::RefMut<'_, i32>) -> Tensor {
    x * (*cell as f64)
}

fn main() {}
