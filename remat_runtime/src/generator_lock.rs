//! `GeneratorLock`: one test at a time on libtorch's process-wide generator.
//!
//! Dropout draws from libtorch's default generator (as do `randn` and the
//! initialisation of every `nn` layer), one per process and device, and tch
//! lets no call take a generator of its own. Cargo runs the tests of one
//! binary on parallel threads, so a test that seeds the generator and then
//! compares a model with checkpoints against the model without can see
//! another test's draws land between its seed and its dropout: the two runs
//! get different masks and the comparison fails now and then. A lock that
//! every such test holds serialises them (docs/testing.md).
//!
//! Invariant: one process-wide mutex; a test that panicked while holding it
//! does not poison it for the others, and a thread that already holds it
//! is told so instead of waiting for itself forever.

use std::cell::Cell;
use std::fmt;
use std::sync::{Mutex, MutexGuard};

static GENERATOR: Mutex<()> = Mutex::new(());

thread_local! {
    // std's mutex deadlocks (or panics, unspecified) on a second lock from
    // the same thread: catch it first, with a message.
    static HELD: Cell<bool> = const { Cell::new(false) };
}

/// Exclusive use of libtorch's process-wide generator, for as long as this
/// value lives: what a test holds while it seeds, builds (initialisation
/// draws too) and runs a model with dropout, so that no other test of the
/// same binary draws in between.
///
/// The lock only orders the tests that take it: every test of the binary
/// that seeds or draws from the generator (`tch::manual_seed`, dropout,
/// `randn`, building `nn` layers) must hold it, or live in a test binary of
/// its own. Recomputation, which restores the generator (rule C14), runs
/// inside `backward`, on the
/// thread that holds the lock for CPU tensors, so the lock covers it.
///
/// ```
/// use remat_runtime::{autograd::GeneratorLock, checkpoint};
/// use tch::{kind::FLOAT_CPU, Kind, Tensor};
///
/// let grad = |remat: bool| {
///     let _rng = GeneratorLock::seeded(5); // no draws of other tests from here
///     let x = Tensor::ones([64], FLOAT_CPU).set_requires_grad(true);
///     let body = |x: &Tensor| x.dropout(0.5, true).sin().sum(Kind::Float);
///     let y = if remat {
///         checkpoint("drop").call(&x, move |x| body(&x))
///     } else {
///         body(&x)
///     };
///     y.backward();
///     x.grad()
/// };
/// assert!(grad(true).equal(&grad(false)));
/// ```
#[must_use = "the generator is free for other tests again once this value is dropped"]
pub struct GeneratorLock {
    _guard: MutexGuard<'static, ()>,
}

impl GeneratorLock {
    /// Waits until no other thread holds the lock, and takes it.
    ///
    /// # Panics
    ///
    /// If this thread holds it already (a second lock would wait forever).
    ///
    /// ```
    /// use remat_runtime::autograd::GeneratorLock;
    /// let _rng = GeneratorLock::acquire();
    /// let x = tch::Tensor::randn([3], tch::kind::FLOAT_CPU); // drawn under the lock
    /// assert_eq!(x.size(), [3]);
    /// ```
    ///
    /// Taking it twice on one thread is a bug in the test, reported at once:
    ///
    /// ```should_panic
    /// use remat_runtime::autograd::GeneratorLock;
    /// let _outer = GeneratorLock::acquire();
    /// let _inner = GeneratorLock::seeded(1); // panics: this thread holds it
    /// ```
    pub fn acquire() -> GeneratorLock {
        assert!(
            !HELD.with(Cell::get),
            "GeneratorLock::acquire: this thread holds the generator lock already"
        );
        // Poisoned means a test panicked holding it: the generator is still
        // usable, and the next test seeds it anyway.
        let guard = GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
        HELD.with(|h| h.set(true));
        GeneratorLock { _guard: guard }
    }

    /// [`acquire`](Self::acquire), then `tch::manual_seed(seed)`: the usual
    /// start of a test that compares runs.
    ///
    /// ```
    /// use remat_runtime::autograd::GeneratorLock;
    /// let draw = || {
    ///     let _rng = GeneratorLock::seeded(3);
    ///     tch::Tensor::randn([4], tch::kind::FLOAT_CPU)
    /// };
    /// assert!(draw().equal(&draw()));
    /// ```
    pub fn seeded(seed: i64) -> GeneratorLock {
        let lock = GeneratorLock::acquire();
        tch::manual_seed(seed);
        lock
    }
}

impl Drop for GeneratorLock {
    fn drop(&mut self) {
        HELD.with(|h| h.set(false));
    }
}

impl fmt::Debug for GeneratorLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GeneratorLock")
    }
}
