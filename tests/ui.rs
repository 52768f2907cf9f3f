//! The macros' compile errors (`ui-tests/fail`, each with its expected
//! `.stderr`) and every allowed use (`ui-tests/pass`, built and run).
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite`, then read them;
//! `REMAT_UI=prefix` runs only the cases whose names start with `prefix`.

#[test]
// docs/dsl.md, "Every compile error, and its fix": each fail case names the rule it enforces.
fn ui() {
    // The pass cases link libtorch but get no rpath of ours (see build.rs).
    let lib = env!("REMAT_LIBTORCH_LIB");
    let path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(old) if !old.is_empty() => {
            let mut paths = vec![std::path::PathBuf::from(lib)];
            paths.extend(std::env::split_paths(&old));
            std::env::join_paths(paths).expect("LD_LIBRARY_PATH")
        }
        _ => lib.into(),
    };
    std::env::set_var("LD_LIBRARY_PATH", path);

    // `REMAT_UI=name` runs the cases whose file name starts with it only.
    let only = std::env::var("REMAT_UI").unwrap_or_default();
    // Two runs, each when its `TestCases` drops. A run holding only
    // compile-fail cases type-checks them all in one `cargo check`; mixed
    // with pass cases, trybuild would build and link each case on its own
    // (minutes more, every run of the suite).
    let fail = trybuild::TestCases::new();
    fail.compile_fail(format!("ui-tests/fail/{only}*.rs"));
    drop(fail);
    let pass = trybuild::TestCases::new();
    pass.pass(format!("ui-tests/pass/{only}*.rs"));
}
