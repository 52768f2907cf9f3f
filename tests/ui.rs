//! The macros' compile errors (`ui-tests/fail`, each with its expected
//! `.stderr`); the allowed uses are `tests/ui_pass.rs`. Regenerate the
//! `.stderr` files with `TRYBUILD=overwrite`, then read them;
//! `REMAT_UI=prefix` runs only the cases whose names start with `prefix`.

#[test]
// docs/dsl.md, "Every compile error, and its fix": each fail case names the rule it enforces.
fn ui() {
    // `REMAT_UI=name` runs the cases whose file name starts with it only.
    let only = std::env::var("REMAT_UI").unwrap_or_default();
    // Compile-fail cases only: trybuild then type-checks them all in one
    // `cargo check`, where pass cases among them would make it build and
    // link each case on its own (minutes more, every run of the suite).
    let t = trybuild::TestCases::new();
    t.compile_fail(format!("ui-tests/fail/{only}*.rs"));
}
