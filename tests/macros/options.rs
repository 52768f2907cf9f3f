//! `#[checkpoint]` options against the runtime: `early_stop = EXPR`
//! switches early stop per checkpoint (docs/dsl.md, F1; docs/semantics.md,
//! rules C17 and C18).

use crate::common::assert_bitwise;
use remat::checkpoint;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use tch::{Kind, Tensor};

/// `sin` saves its input and is the last save; the two ops after it save
/// nothing and count their runs. `strict = false`: strict recomputation
/// (which `REMAT_STRICT_RECOMPUTE=1` turns on for the whole process)
/// always replays the whole body (rule C18).
#[checkpoint(early_stop = stop, strict = false)]
fn tail(x: &Tensor, runs: Arc<AtomicUsize>, stop: bool) -> Tensor {
    let h = x.sin();
    runs.fetch_add(1, SeqCst);
    let a = &h * 2.0;
    runs.fetch_add(1, SeqCst);
    a + 1.0
}

fn runs_of(stop: bool) -> (usize, Tensor) {
    let x = Tensor::from_slice(&[0.5f32, 1.5]).set_requires_grad(true);
    let runs = Arc::new(AtomicUsize::new(0));
    tail(&x, runs.clone(), stop).sum(Kind::Float).backward();
    (runs.load(SeqCst), x.grad().copy())
}

#[test]
fn early_stop_false_runs_the_tail_again_on_replay() {
    let (stopped, g1) = runs_of(true);
    let (whole, g2) = runs_of(false);
    assert_eq!(stopped, 2, "early stop: the forward's tail only");
    assert_eq!(whole, 4, "without: the replay runs the tail again");
    let x = Tensor::from_slice(&[0.5f32, 1.5]);
    let expected = x.cos() * 2.0;
    assert_bitwise(&g1, &expected, "gradient, early stop");
    assert_bitwise(&g2, &expected, "gradient, whole replay");
}
