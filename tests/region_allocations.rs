//! What the region path asks of the heap: the runtime's own (Rust)
//! allocations on this thread, counted by the global allocator of this test
//! binary (`tracking-allocator`'s; libtorch's go through C++, unseen).
//!
//! A region's cost on a small op is mostly allocation (docs/performance.md,
//! section 3), and one size matters most: a request above glibc's small
//! bins (1008 bytes) makes it consolidate every fast bin freed since the
//! last one, which on a tensor op's dozen small frees costs more than the
//! rest of the region together. So no region may make one per call.

use remat::{checkpoint, region, Policy};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use tch::{Kind, Tensor};
use tracking_allocator::{
    AllocationGroupId, AllocationGroupToken, AllocationRegistry, AllocationTracker, Allocator,
};

/// The largest request glibc serves from a small bin on 64-bit Linux.
const SMALL_BIN_MAX: usize = 1008;

#[global_allocator]
static ALLOCATOR: Allocator<std::alloc::System> = Allocator::system();

static ALL: AtomicUsize = AtomicUsize::new(0);
static LARGE: AtomicUsize = AtomicUsize::new(0);

/// The counters are global and count every thread's groups: one test at a
/// time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts the allocations made inside an entered group (only `count`'s).
struct Counter;

impl AllocationTracker for Counter {
    fn allocated(&self, _: usize, size: usize, _: usize, group: AllocationGroupId) {
        if group != AllocationGroupId::ROOT {
            ALL.fetch_add(1, Relaxed);
            if size > SMALL_BIN_MAX {
                LARGE.fetch_add(1, Relaxed);
            }
        }
    }
    fn deallocated(
        &self,
        _: usize,
        _: usize,
        _: usize,
        _: AllocationGroupId,
        _: AllocationGroupId,
    ) {
    }
}

/// Rust allocations (all, and those above a small bin) on this thread
/// while `f` runs.
fn count<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        AllocationRegistry::set_global_tracker(Counter).expect("the only tracker");
        AllocationRegistry::enable_tracking();
    });
    let mut group = AllocationGroupToken::register().expect("an allocation group");
    ALL.store(0, Relaxed);
    LARGE.store(0, Relaxed);
    let out = {
        let _in = group.enter();
        f()
    };
    (out, ALL.load(Relaxed), LARGE.load(Relaxed))
}

/// Region names as literals give them: borrowed, no formatting per call.
fn names(n: usize) -> Vec<&'static str> {
    (0..n)
        .map(|i| &*Box::leak(format!("r{i}").into_boxed_str()))
        .collect()
}

/// One kind of chain: its ops, and each op's region policy.
struct Chain {
    /// The checkpoint's name with regions and without: two checkpoints,
    /// as a model's would be, each remembering its own sizes.
    names: [&'static str; 2],
    policy: fn(usize) -> Policy,
    op: fn(&Tensor) -> Tensor,
}

/// Regions alternating `Save` and `Recompute` around one-element `sin`s
/// (each saves its input, which a `Save` region rebuilds): the bench's
/// chain.
const ALTERNATING: Chain = Chain {
    names: ["regions", "bare"],
    policy: |i| [Policy::Save, Policy::Recompute][i % 2],
    op: |h| h.sin(),
};

/// `Save` regions whose bodies each keep one save of their own (`sin`
/// saves the product, which is not a region input).
const KEEPING: Chain = Chain {
    names: ["keeping", "keeping-bare"],
    policy: |_| Policy::Save,
    op: |h| (h * 1.0001).sin(),
};

impl Chain {
    /// A checkpoint's forward around one op per name, as regions or as
    /// bare code.
    fn run(&self, x: &Tensor, names: &[&'static str], regions: bool) -> Tensor {
        let (names, policy, op) = (names.to_vec(), self.policy, self.op);
        checkpoint(self.names[usize::from(!regions)]).call(x, move |x| {
            let mut h = x;
            for (i, &name) in names.iter().enumerate() {
                h = if regions {
                    region(name, policy(i)).call(&h, op)
                } else {
                    op(&h)
                };
            }
            h
        })
    }

    /// Both forwards, warmed first (one-time state: thread-locals,
    /// libtorch's first calls), then counted: (value, allocations, large
    /// ones) as bare code, then as regions.
    fn counted(&self, x: &Tensor, names: &[&'static str]) -> [(Tensor, usize, usize); 2] {
        for regions in [true, false] {
            self.run(x, names, regions).sum(Kind::Float).backward();
        }
        [false, true].map(|regions| count(|| self.run(x, names, regions)))
    }
}

#[test]
// docs/performance.md, section 3: the region path's allocations.
fn regions_on_the_forward_make_no_request_above_a_small_bin() {
    let _serial = serial();
    tch::set_num_threads(1);
    let x = Tensor::ones([1], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let n = 64;
    let [(bare, bare_all, bare_large), (with, all, large)] = ALTERNATING.counted(&x, &names(n));
    println!(
        "{n} ops: bare code {bare_all} allocations ({bare_large} large), \
         as regions {all} ({large} large)"
    );
    // The checkpoint's tables start at the sizes its last forward reached
    // and the claimed-name set is an earlier frame's, so a steady-state
    // forward makes one large request per table it keeps (1 for 64
    // regions here), not one per doubling (6 when the tables grew from
    // empty), let alone one per `Save` region (32).
    assert!(
        large.saturating_sub(bare_large) <= 2,
        "{} requests above {SMALL_BIN_MAX} bytes for {n} regions",
        large.saturating_sub(bare_large)
    );
    // A `Save` region keeps a record with its inputs' and outputs'
    // metadata and what its body saves, a `Recompute` region nothing of
    // its own: 2.5 per region (3.0 when each rebuilt save formatted its
    // name, 3.3 with the tables grown from empty as well).
    let per_region = (all - bare_all) as f64 / n as f64;
    assert!(per_region <= 2.6, "{per_region:.2} allocations per region");
    // The same values: the count does not come from skipping work.
    assert!(with.equal(&bare));
    // The backward, with its replay (on this thread: a CPU graph runs on
    // the caller's), likewise.
    let ((), bare_all, bare_large) = count(|| bare.sum(Kind::Float).backward());
    let ((), all, large) = count(|| with.sum(Kind::Float).backward());
    println!(
        "backward: bare code {bare_all} allocations ({bare_large} large), \
         as regions {all} ({large} large)"
    );
    // The replay's frame reuses the forward's claimed-name set: no large
    // request at all (2 with a fresh set).
    assert!(
        large.saturating_sub(bare_large) == 0,
        "{} requests above {SMALL_BIN_MAX} bytes in the backward of {n} regions",
        large.saturating_sub(bare_large)
    );
}

#[test]
// docs/semantics.md, rules S1 and D2: a kept save's report row is made from
// the metadata the save's checks read anyway (no sizes or strides on the
// heap), and an unnamed save's name is formatted only when shown.
fn a_kept_save_allocates_no_strings_or_shapes() {
    let _serial = serial();
    tch::set_num_threads(1);
    let x = Tensor::ones([1], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let n = 64;
    let [(bare, bare_all, _), (with, all, _)] = KEEPING.counted(&x, &names(n));
    let per_region = (all - bare_all) as f64 / n as f64;
    println!("{n} Save regions keeping one save each: {per_region:.2} allocations per region");
    assert!(with.equal(&bare));
    // 4.9 per region; 6.9 when each save formatted its name and copied it
    // for its report row, 8.9 when the row also held its sizes and
    // strides in two vectors of their own.
    assert!(per_region <= 5.0, "{per_region:.2} allocations per region");
}
