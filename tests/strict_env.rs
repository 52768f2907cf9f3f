//! `REMAT_STRICT_RECOMPUTE=1` turns strict recomputation on for the whole process. A
//! test binary of its own: the variable is read once, by the first
//! checkpoint.

use remat_reference::testing as common;

use common::input;
use remat::{checkpoint, region, Policy};
use tch::Kind;

#[test]
// docs/semantics.md, rule P5.
fn the_environment_variable_makes_every_checkpoint_strict() {
    std::env::set_var("REMAT_STRICT_RECOMPUTE", "1");
    let x = input();
    let y = checkpoint("env").call(&x, |x| {
        let h = region("exp", Policy::Save).call(&x, |x| x.exp());
        h.sin().sum(Kind::Float) // reads `h` without asking
    });
    let err = y.f_backward().unwrap_err().to_string();
    assert!(err.contains("`env::exp.out` is a placeholder"), "{err}");
    // An explicit option still wins.
    let x = input();
    let y = checkpoint("lax").strict_recompute(false).call(&x, |x| {
        let h = region("exp", Policy::Save).call(&x, |x| x.exp());
        h.sin().sum(Kind::Float)
    });
    assert!(y.f_backward().is_ok());
}
