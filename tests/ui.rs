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
    // trybuild's project has no profile of its own, so its dev profile
    // would give the build scripts' C++ (torch-sys's wrapper, the bridge)
    // full debug info, which a type check never uses: the workspace's
    // dependencies build without it too (Cargo.toml).
    std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "false");
    let t = trybuild::TestCases::new();
    t.compile_fail(format!("ui-tests/fail/{only}*.rs"));
}
