//! The crate `cargo xtask package` builds against the packages, as a user's
//! crate would use them: a block written with the macros runs one forward
//! and backward with its checkpoint and once without; the loss and every
//! gradient must agree to the bit, and the checkpoint must have replayed
//! its `recompute` region (and only it) in backward.

#![deny(warnings)]

use remat::prelude::*;
use remat::tch::{self, Device, Kind};
use std::sync::atomic::{AtomicUsize, Ordering};

/// How often each region's body ran: [first, second].
static RUNS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

fn layer(which: usize, x: &Tensor, w: &Tensor) -> Tensor {
    RUNS[which].fetch_add(1, Ordering::SeqCst);
    x.matmul(w).tanh()
}

fn first(x: &Tensor, w: &Tensor) -> Tensor {
    layer(0, x, w)
}

fn second(x: &Tensor, w: &Tensor) -> Tensor {
    layer(1, x, w)
}

#[derive(Capture)]
struct Block {
    w1: Tensor,
    w2: Tensor,
    checkpointing: bool,
}

impl Block {
    #[checkpoint(name = "block", enabled = self.checkpointing)]
    fn forward(&self, x: &Tensor) -> Tensor {
        remat! {
            let a = save first: first(x, &self.w1);
            needs a;
            let x = x + &a;
            let m = recompute second: second(&x, &self.w2);
        }
        x * m
    }
}

fn bits(t: &Tensor) -> Vec<u32> {
    Vec::<f32>::try_from(t.flatten(0, -1))
        .expect("a float tensor")
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

/// The loss and gradients of one step, and how often each region ran.
fn step(checkpointing: bool) -> (Vec<Vec<u32>>, [usize; 2]) {
    tch::manual_seed(0);
    let opts = (Kind::Float, Device::Cpu);
    let block = Block {
        w1: Tensor::randn([8, 8], opts).set_requires_grad(true),
        w2: Tensor::randn([8, 8], opts).set_requires_grad(true),
        checkpointing,
    };
    let x = Tensor::randn([4, 8], opts).set_requires_grad(true);
    let before = [0, 1].map(|i| RUNS[i].load(Ordering::SeqCst));
    let loss = block.forward(&x).square().sum(Kind::Float);
    loss.backward();
    let runs = [0, 1].map(|i| RUNS[i].load(Ordering::SeqCst) - before[i]);
    let values = [&loss, &block.w1.grad(), &block.w2.grad(), &x.grad()]
        .map(bits)
        .to_vec();
    (values, runs)
}

fn main() {
    tch::set_num_threads(1);
    let (plain, plain_runs) = step(false);
    let (checkpointed, checkpointed_runs) = step(true);
    assert_eq!(
        plain_runs,
        [1, 1],
        "without the checkpoint each region runs once"
    );
    assert_eq!(
        checkpointed_runs,
        [1, 2],
        "with it, backward replays the `recompute` region and serves the `save` one"
    );
    assert!(
        plain == checkpointed,
        "the loss or a gradient differs with the checkpoint"
    );
    println!(
        "remat package check: ok (gradients bitwise equal with and without the checkpoint, \
         the recompute region replayed once)"
    );
}
