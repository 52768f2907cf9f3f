//! Trains a model for three steps and records everything that must match:
//! each step's loss and gradients, then every variable (parameters and
//! buffers) of the store.

use crate::common::assert_bitwise;
use remat::nn::{self, OptimizerConfig};
use tch::Tensor;

/// What one run produced.
pub struct Run {
    pub losses: Vec<Tensor>,
    /// Per step, every trainable variable's gradient, by name.
    pub grads: Vec<Vec<(String, Tensor)>>,
    /// Every variable after the last step, by name (buffers included).
    pub vars: Vec<(String, Tensor)>,
}

fn sorted(vs: &nn::VarStore) -> Vec<(String, Tensor)> {
    let mut vars: Vec<_> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}

/// Seeds the generator, builds the model, and trains it for three steps of
/// Adam with `loss` (which may draw from the generator: dropout).
pub fn train<M>(
    seed: i64,
    build: impl Fn(&nn::Path) -> M,
    loss: impl Fn(&M, usize) -> Tensor,
) -> Run {
    tch::set_num_threads(1);
    tch::manual_seed(seed);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let model = build(&vs.root());
    let mut opt = nn::Adam::default().build(&vs, 1e-2).unwrap();
    let mut run = Run {
        losses: vec![],
        grads: vec![],
        vars: vec![],
    };
    for step in 0..3 {
        opt.zero_grad();
        let l = loss(&model, step);
        l.backward();
        run.losses.push(l.detach().copy());
        run.grads.push(
            sorted(&vs)
                .into_iter()
                .filter(|(_, t)| t.requires_grad())
                .map(|(n, t)| (n, t.grad().copy()))
                .collect(),
        );
        opt.step();
    }
    run.vars = sorted(&vs)
        .into_iter()
        .map(|(n, t)| (n, t.detach().copy()))
        .collect();
    run
}

/// Asserts that two runs are bit-identical, naming what differs.
pub fn assert_same(a: &Run, b: &Run, what: &str) {
    for (step, (la, lb)) in a.losses.iter().zip(&b.losses).enumerate() {
        assert_bitwise(la, lb, &format!("{what}: loss of step {step}"));
    }
    for (step, (ga, gb)) in a.grads.iter().zip(&b.grads).enumerate() {
        assert_eq!(ga.len(), gb.len());
        for ((name, ta), (_, tb)) in ga.iter().zip(gb) {
            assert!(ta.defined(), "{what}: `{name}` got no gradient");
            assert_bitwise(
                ta,
                tb,
                &format!("{what}: gradient of `{name}` at step {step}"),
            );
        }
    }
    assert_eq!(a.vars.len(), b.vars.len());
    for ((name, ta), (nb, tb)) in a.vars.iter().zip(&b.vars) {
        assert_eq!(name, nb);
        assert_bitwise(ta, tb, &format!("{what}: `{name}` after 3 steps"));
    }
}
