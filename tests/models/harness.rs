//! Trains a model for three steps and records everything that must match:
//! each step's loss and gradients, then every variable (parameters and
//! buffers) of the store.

use crate::common::{assert_bitwise, assert_same_run, Run as Step};
use remat::nn::{self, OptimizerConfig};
use tch::Tensor;

/// What one run produced.
pub struct Run {
    /// Per step, the loss and every trainable variable's gradient, by name.
    pub steps: Vec<Step>,
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
        steps: vec![],
        vars: vec![],
    };
    for step in 0..3 {
        opt.zero_grad();
        let l = loss(&model, step);
        l.backward();
        let trainable = sorted(&vs).into_iter().filter(|(_, t)| t.requires_grad());
        run.steps.push(Step::of(&l, trainable));
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
    assert_eq!(a.steps.len(), b.steps.len());
    for (step, (sa, sb)) in a.steps.iter().zip(&b.steps).enumerate() {
        assert_same_run(sa, sb, &format!("{what}, step {step}"));
    }
    assert_eq!(a.vars.len(), b.vars.len());
    for ((name, ta), (nb, tb)) in a.vars.iter().zip(&b.vars) {
        assert_eq!(name, nb);
        assert_bitwise(ta, tb, &format!("{what}: `{name}` after 3 steps"));
    }
}
