//! Every allowed use of the macros (`ui-tests/pass`), each file a module of
//! this binary whose `main` is a test. The compile errors are `tests/ui.rs`
//! (trybuild); the allowed uses need no crate of their own: like any test
//! binary, this one uses `remat` from outside, as a user's crate does, and
//! building them here spares trybuild a second, linked build of tch and
//! libtorch's wrappers in its own folder (minutes of `cargo xtask test`).

use std::sync::Mutex;

/// What the adversarial rounds' cases compare: a model's gradient with its
/// checkpoint on and off.
mod bitwise {
    use tch::{Device, Kind, Tensor};

    /// The gradient of `w` through `model`, with its checkpoint on or off.
    fn grad(name: &str, model: &dyn Fn(&Tensor, &Tensor, bool) -> Tensor, on: bool) -> Tensor {
        tch::manual_seed(0);
        let x = Tensor::randn([4, 4], (Kind::Float, Device::Cpu));
        let w = Tensor::randn([4, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        model(&x, &w, on)
            .sum(Kind::Float)
            .f_backward()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        w.grad()
    }

    /// `model` under a checkpoint with strict recomputation gives bitwise the
    /// gradient it gives without one.
    pub fn same_gradients(name: &str, model: impl Fn(&Tensor, &Tensor, bool) -> Tensor) {
        let (on, off) = (grad(name, &model, true), grad(name, &model, false));
        assert!(
            on.equal(&off),
            "{name}: the gradients must be bitwise those without the checkpoint"
        );
    }
}

/// The cases were written as programs of their own: one at a time, so that
/// none sees another's policy table, generator draws or thread state.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

macro_rules! pass_case {
    ($($name:ident)*) => {$(
        // The adversarial rounds write code in the shapes they test (a
        // closure called where it is written, `return` at the end, a
        // `break` inside an expression), not in clippy's.
        #[allow(
            clippy::assign_op_pattern,
            clippy::diverging_sub_expression,
            clippy::needless_return,
            clippy::redundant_closure_call,
            clippy::useless_vec
        )]
        mod $name {
            include!(concat!("../ui-tests/pass/", stringify!($name), ".rs"));

            #[test]
            fn compiles_and_runs() {
                let _one = super::ONE_AT_A_TIME
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                main();
            }
        }
    )*};
}

pass_case! {
    checkpoint_forms
    dataflow
    duplicate_name
    fixes
    fixes_more
    generated_programs
    is_recomputing
    loops
    macro_from_outside
    metadata
    model_attention
    model_moe
    model_nested
    model_policies
    model_residual_loop
    needs
    nested_returns_plain
    on_forward
    region_argument
    return_save
    run_time_mistakes
    run_time_policy
    safe_reads
    scope
}

/// A file added to `ui-tests/pass` without a line above would be tested by
/// nothing.
#[test]
fn every_pass_case_is_listed() {
    let listed = [
        "checkpoint_forms",
        "dataflow",
        "duplicate_name",
        "fixes",
        "fixes_more",
        "generated_programs",
        "is_recomputing",
        "loops",
        "macro_from_outside",
        "metadata",
        "model_attention",
        "model_moe",
        "model_nested",
        "model_policies",
        "model_residual_loop",
        "needs",
        "nested_returns_plain",
        "on_forward",
        "region_argument",
        "return_save",
        "run_time_mistakes",
        "run_time_policy",
        "safe_reads",
        "scope",
    ];
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/ui-tests/pass");
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".rs").map(str::to_string)
        })
        .collect();
    found.sort();
    assert_eq!(
        found, listed,
        "list each file of ui-tests/pass in pass_case!"
    );
}
