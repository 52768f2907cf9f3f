//! `REMAT_PRESERVE_RNG_STATE` and the process-wide switch
//! (`remat::Checkpoint::set_default_preserve_rng_state`): a test binary of
//! its own, since both change every checkpoint of the process
//! (docs/semantics.md, rule C14).

use remat::autograd::GeneratorLock;
use remat::{checkpoint, Checkpoint};
use tch::{kind::FLOAT_CPU, Kind, Tensor};

/// Whether a checkpoint's recomputation drew its forward's dropout mask:
/// the gradient is then zero exactly where the output is.
fn same_mask(ckpt: remat::Checkpoint) -> bool {
    let x = Tensor::ones([256], FLOAT_CPU).set_requires_grad(true);
    let y = ckpt.call(&x, |x| x.dropout(0.5, true));
    y.sum(Kind::Float).backward();
    x.grad().ne(0.0).equal(&y.ne(0.0))
}

#[test]
// docs/semantics.md, rule C14: the environment's default, the process-wide
// switch over it, and a checkpoint's own choice over both.
fn the_environment_and_the_global_switch_set_the_default_and_a_checkpoint_wins() {
    let _rng = GeneratorLock::seeded(3);
    std::env::set_var("REMAT_PRESERVE_RNG_STATE", "off");
    assert!(
        !Checkpoint::default_preserve_rng_state(),
        "REMAT_PRESERVE_RNG_STATE=off"
    );
    assert!(!same_mask(checkpoint("env")));
    assert!(same_mask(checkpoint("own").preserve_rng_state(true)));
    // Read once: changing the variable later changes nothing.
    std::env::set_var("REMAT_PRESERVE_RNG_STATE", "1");
    assert!(!Checkpoint::default_preserve_rng_state());

    Checkpoint::set_default_preserve_rng_state(true);
    assert!(same_mask(checkpoint("global on")));
    assert!(!same_mask(checkpoint("own").preserve_rng_state(false)));
    Checkpoint::set_default_preserve_rng_state(false);
    assert!(!same_mask(checkpoint("global off")));
    assert!(same_mask(checkpoint("own").preserve_rng_state(true)));
}
