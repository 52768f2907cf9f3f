//! The macros' compile errors (`ui-tests/fail`, each with its expected
//! `.stderr`) and every allowed use (`ui-tests/pass`, built and run).
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite`, then read them.

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

    let t = trybuild::TestCases::new();
    t.compile_fail("ui-tests/fail/*.rs");
    t.pass("ui-tests/pass/*.rs");
}
