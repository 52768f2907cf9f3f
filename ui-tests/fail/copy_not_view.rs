// `i` with a tensor index is `index_select`, a copy, not a view (issue
// 19): taking it reads the `save` output, and `needs rows;` would keep the
// copy, not `a`.
use remat::{checkpoint, remat};
use tch::{IndexOp, Tensor};

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

#[checkpoint]
fn block(x: &Tensor, idx: &Tensor) -> Tensor {
    remat! { let a = save attention: attention(x); }
    let rows = a.i(idx);
    remat! { needs rows; }
    rows.exp()
}

fn main() {}
