// `i` with a tensor index is `index_select`, a copy, not a view (issue
// 19): `Saved<Tensor>` has views only (`narrow`, `select`, ...), no
// indexing, so the copy needs the value marked first (docs/dsl.md, Y5).
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
