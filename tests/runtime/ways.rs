//! The ways a checkpoint can keep or drop a value, for tests that compare
//! each with the model without checkpoints bit for bit, and inputs of no
//! pattern that every test thread draws alike (the global generator is
//! shared with the tests running beside them).

use remat::Policy;
use tch::Tensor;

/// How a closure's middle value is made.
#[derive(Clone, Copy, Debug)]
pub enum Way {
    /// No checkpoint at all: the reference.
    Plain,
    /// Bare code in a checkpoint, early stop as given.
    Bare { early_stop: bool },
    /// Inside a region of this policy.
    Region(Policy),
}

/// Every way but `Plain`.
pub const WAYS: [Way; 6] = [
    Way::Bare { early_stop: false },
    Way::Bare { early_stop: true },
    Way::Region(Policy::Recompute),
    Way::Region(Policy::Save),
    Way::Region(Policy::OFFLOAD),
    Way::Region(Policy::Auto),
];

/// `n` values of no pattern, set by `seed`.
pub fn values(n: i64, seed: f64) -> Tensor {
    (Tensor::arange(n, tch::kind::FLOAT_CPU) * 1.7 + seed).sin() * 1.3
}
