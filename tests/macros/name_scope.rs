//! Name scopes with the macros (docs/semantics.md, rule R10): a
//! `#[checkpoint]` body calls a sub-block written with `remat!` twice, each
//! call in its own `remat::name_scope`, so the sub-block's fixed region
//! names are told apart; a policy table picks each call's policy by the
//! scoped name.

use crate::common::assert_bitwise;
use remat::policies::PolicyTable;
use remat::{checkpoint, name_scope, remat};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use tch::{Kind, Tensor};

/// Counts the runs of the sub-block's region.
struct Counted<'a>(&'a AtomicUsize);

impl Counted<'_> {
    fn tanh(&self, x: &Tensor) -> Tensor {
        self.0.fetch_add(1, SeqCst);
        x.tanh()
    }
}

/// A sub-block whose one region, `act`, is `auto`.
fn sub_block(x: &Tensor, runs: &AtomicUsize) -> Tensor {
    let counted = Counted(runs);
    remat! {
        let h = auto act: counted.tanh(x);
        needs h;
    }
    h * 2.0
}

#[checkpoint]
fn two_blocks(x: &Tensor, runs: Arc<AtomicUsize>) -> Tensor {
    let h = name_scope("block.0", || sub_block(x, &runs));
    name_scope("block.1", || sub_block(&h, &runs))
}

#[test]
fn a_sub_block_written_with_remat_runs_once_per_scope_and_tables_see_the_scoped_names() {
    let x = Tensor::from_slice(&[0.3f32, -1.2, 0.7, 2.0]).set_requires_grad(true);
    let runs = Arc::new(AtomicUsize::new(0));
    let table = PolicyTable::new()
        .save("two_blocks::block.0/act")
        .recompute("two_blocks::block.1/act")
        .strict(true);
    let y = table.scope(|| two_blocks(&x, runs.clone())).unwrap();
    y.sum(Kind::Float).backward();
    assert_eq!(runs.load(SeqCst), 3, "block.0 saved, block.1 recomputed");
    let x0 = x.detach().set_requires_grad(true);
    ((x0.tanh() * 2.0).tanh() * 2.0).sum(Kind::Float).backward();
    assert_bitwise(&x.grad(), &x0.grad(), "gradient");
}
