//! Project tasks: `cargo xtask setup | env | test | package | demo | bench | soak | leaks | walkthrough | guarantee | gpu-kit`.
//!
//! `setup` installs libtorch (the PyPI wheel `torch==2.13.0`) into a per-user
//! cache shared by every clone and links it as `.libtorch` in the repository,
//! where `.cargo/config.toml` points torch-sys at it; likewise Gloo's headers
//! for remat_distributed (`gloo.rs`), linked as `.gloo`. `env` prints the
//! `.cargo/config.toml` a crate of yours needs (the README's recipe); both
//! are in `setup.rs`. `test` (`test.rs`) and `demo` (`demo.rs`) run `setup`
//! first, so both work from a fresh clone; both build the training example
//! `examples/train_gpt`, a crate of its own that follows the recipe
//! (`train_gpt.rs`). `bench` (`bench.rs`) also installs the Python peer
//! `torch_remat` into the same venv, and only it does; after
//! docs/performance.md it writes the training example's runs into
//! docs/training-example.md (`training_doc.rs`), or only that with
//! `--training-example`. `soak` (`soak.rs`) runs the long reliability
//! checks, `leaks` the leak check alone (`leaks.rs`), `walkthrough` the
//! check of docs/architecture.md's walk-through against the files its
//! scenario runs (`walkthrough.rs`). `package` checks that the crates as `cargo publish` would
//! upload them build and run for a user (`package.rs`); `test` runs it last.
//! `test --libtorch 2.11` runs the same tests against libtorch 2.11 (tch
//! 0.24) in a copy of the repository whose lock file alone differs
//! (`libtorch_range.rs`). What the tasks share: where the repository and
//! the cache are (`paths.rs`), running a command (`run.rs`) and the wall
//! time of `test`'s parts (`timing.rs`).

use std::env;
use std::process::ExitCode;

mod bench;
mod debian;
mod demo;
mod gloo;
mod gpu_kit;
mod guarantee;
mod leaks;
mod libtorch_range;
mod package;
mod paths;
mod run;
mod setup;
mod soak;
mod test;
mod timing;
mod train_gpt;
mod training_doc;
mod walkthrough;

/// The libtorch version that tch 0.26 is written against.
const TORCH_VERSION: &str = "2.13.0";

/// The Python peer the benchmark compares with (PyPI).
const TORCH_REMAT_VERSION: &str = "0.2.0";

/// The CUDA `crt/` headers matching the CUDA 13.0 wheels of torch 2.13.0
/// and 2.11.0 (both bring nvidia-cuda-runtime 13.0.96).
const CUDA_CRT: &str = "nvidia-cuda-crt==13.0.88";
/// CCCL of the same CUDA 13.0 (`nv/target`, for NCCL's header).
const CUDA_CCCL: &str = "nvidia-cuda-cccl==13.0.85";

pub(crate) type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let outcome = match task {
        "setup" => setup::setup().map(|dir| {
            println!("libtorch {TORCH_VERSION} ready at {}", dir.display());
        }),
        "env" => setup::setup().map(|dir| print!("{}", setup::user_config(&dir))),
        "test" if args.get(1).map(String::as_str) == Some("--libtorch") => {
            libtorch_range::test(&args[2..])
        }
        // What `test --libtorch` runs in its copy of the repository, whose
        // libtorch is set up already.
        "test-suite" => {
            let outcome = test::test()
                .and_then(|_| timing::part("the training example", train_gpt::test_train_crate));
            timing::print_table();
            outcome
        }
        "test" => {
            let outcome = timing::part("libtorch's set-up", setup::setup)
                .and_then(|_| test::test())
                .and_then(|_| timing::part("the training example", train_gpt::test_train_crate))
                .and_then(|_| timing::part("a panic = \"abort\" crate", test::test_abort_crate))
                // The rust-version check installs a second toolchain (minutes
                // on a fresh machine): `cargo xtask package` runs it, `test`
                // skips it unless REMAT_MSRV=1.
                .and_then(|_| {
                    timing::part("the packages", || {
                        package::package(std::env::var_os("REMAT_MSRV").is_some())
                    })
                });
            timing::print_table();
            outcome
        }
        "package" => setup::setup().and_then(|_| package::package(true)),
        "demo" => setup::setup().and_then(|_| demo::demo()),
        "leaks" => setup::setup().and_then(|_| leaks::leaks()),
        "walkthrough" => setup::setup().and_then(|_| walkthrough::walkthrough()),
        "soak" => setup::setup().and_then(|_| soak::soak()),
        "bench" => setup::setup().and_then(|torch| bench::bench(&torch, &args[1..])),
        "gpu-kit" => gpu_kit::gpu_kit(&args[1..]),
        "guarantee" => guarantee::guarantee(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask <task>\n\n\
                 tasks:\n  \
                 setup  install libtorch {TORCH_VERSION} (cached per user) and link it as .libtorch\n  \
                 env    setup, then print the .cargo/config.toml of a crate that uses remat\n  \
                 test   setup, then every test, rustfmt and clippy, the training example \
                 and `package` (without its rust-version check unless REMAT_MSRV=1)\n  \
                 test --libtorch 2.11  the same tests and training example against libtorch \
                 2.11 (tch 0.24), in its own venv and target folder\n  \
                 package  package the three crates, build and run a fresh crate with \
                 `remat = \"0.1\"` against them, build their docs as docs.rs does, check \
                 them with the rust-version's compiler\n  \
                 demo   setup, then train the reference model under each policy\n  \
                 bench  setup, install torch_remat {TORCH_REMAT_VERSION} into the venv, run \
                 benches/perf against the Python peers and write docs/performance.md \
                 (--quick: a short smoke run of that alone; --threads N: its intra-op threads, \
                 default 1), then run the training example as the README shows it and write \
                 docs/training-example.md\n  \
                 bench --training-example  setup, then only the training example's runs and \
                 docs/training-example.md\n  \
                 leaks  setup, then the leak check alone (part of `test`)\n  \
                 walkthrough  setup, then check docs/architecture.md's walk-through against \
                 the files its scenario runs, under callgrind (part of `test`)\n  \
                 soak   setup, then the long reliability runs (docs/reliability.md)\n  \
                 guarantee  random programs against the compile-time guarantee: every one \
                 runs clean under strict recomputation, every one with a mark taken away \
                 fails to compile (--seed S --count N: another round; --out DIR: only \
                 write the files)\n  \
                 gpu-kit  build target/gpu-kit, which checks remat on a GPU machine \
                 (docs/gpu.md); --smoke: run it here on the CPU; --libtorch VERSION|DIR: \
                 the libtorch to build against"
            );
            return if task == "help" || task == "--help" {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask {task}: error: {message}");
            ExitCode::FAILURE
        }
    }
}
