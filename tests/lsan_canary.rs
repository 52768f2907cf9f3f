//! The leak checker's canary. `cargo xtask test` runs the test binaries
//! under LeakSanitizer; to show that the set-up really catches a leak, it
//! also runs this binary with `REMAT_LSAN_CANARY=1`, where it leaks one
//! tensor on purpose, and requires LeakSanitizer to fail it. Without the
//! variable it does nothing.

fn main() {
    if std::env::var_os("REMAT_LSAN_CANARY").is_some() {
        let t = tch::Tensor::ones([1024], tch::kind::FLOAT_CPU);
        std::mem::forget(t); // the handle and its 4 KiB storage, unreachable
        println!("lsan_canary: leaked one tensor on purpose");
    } else {
        // Not a test of its own: `cargo test` runs it too, and it must not
        // claim a pass for a check it did not make.
        println!(
            "lsan_canary: nothing to do without REMAT_LSAN_CANARY=1 (cargo xtask test sets it)"
        );
    }
}
