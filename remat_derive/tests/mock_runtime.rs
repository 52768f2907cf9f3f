//! The expansions compile and run against a mock of the runtime's API.
//!
//! The macros name the runtime as `::remat::...`; this test crate calls
//! itself `remat` and provides the items the expansion references, with the
//! signatures the real runtime has, so that hygiene, borrows, closure kinds
//! (`Fn + 'static`) and the visibility of bindings are checked by rustc.
//! The mock runs every checkpoint body twice (forward, then a replay).

extern crate self as remat;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

pub use remat_derive::{checkpoint, remat, Capture};

thread_local! {
    static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static RECOMPUTING: Cell<bool> = const { Cell::new(false) };
}

fn log(entry: impl Into<String>) {
    LOG.with(|l| l.borrow_mut().push(entry.into()));
}

fn take_log() -> Vec<String> {
    LOG.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

/// A scalar standing in for a tensor.
#[derive(Debug, PartialEq)]
pub struct Tensor(pub f64);

impl Tensor {
    pub fn shallow_clone(&self) -> Tensor {
        Tensor(self.0)
    }
    pub fn view(&self, _shape: [i64; 1]) -> Tensor {
        Tensor(self.0)
    }
    pub fn size(&self) -> Vec<i64> {
        vec![1]
    }
    pub fn exp(&self) -> Tensor {
        Tensor(self.0.exp())
    }
}

impl std::ops::Add<&Tensor> for &Tensor {
    type Output = Tensor;
    fn add(self, rhs: &Tensor) -> Tensor {
        Tensor(self.0 + rhs.0)
    }
}

impl std::ops::Add<Tensor> for Tensor {
    type Output = Tensor;
    fn add(self, rhs: Tensor) -> Tensor {
        Tensor(self.0 + rhs.0)
    }
}

impl std::ops::Add<&Tensor> for Tensor {
    type Output = Tensor;
    fn add(self, rhs: &Tensor) -> Tensor {
        Tensor(self.0 + rhs.0)
    }
}

impl std::ops::Add<Tensor> for &Tensor {
    type Output = Tensor;
    fn add(self, rhs: Tensor) -> Tensor {
        Tensor(self.0 + rhs.0)
    }
}

pub trait Capture: Sized + 'static {
    fn capture(&self) -> Self;
}

impl Capture for Tensor {
    fn capture(&self) -> Self {
        self.shallow_clone()
    }
}

macro_rules! capture_clone {
    ($($t:ty)*) => { $(impl Capture for $t { fn capture(&self) -> Self { self.clone() } })* };
}
capture_clone!(usize i64 f64 bool String);

impl<T: Capture> Capture for Option<T> {
    fn capture(&self) -> Self {
        self.as_ref().map(Capture::capture)
    }
}

impl<T: Capture> Capture for Vec<T> {
    fn capture(&self) -> Self {
        self.iter().map(Capture::capture).collect()
    }
}

impl<T: 'static> Capture for Rc<T> {
    fn capture(&self) -> Self {
        Rc::clone(self)
    }
}

impl<A: Capture, B: Capture> Capture for (A, B) {
    fn capture(&self) -> Self {
        (self.0.capture(), self.1.capture())
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Policy {
    Save,
    Recompute,
    /// From the active plan (the real runtime's `Policy::Auto`).
    Auto,
}

pub enum Determinism {
    None,
    Metadata,
    Bitwise,
}

pub struct Region {
    name: Cow<'static, str>,
    policy: Policy,
}

#[track_caller]
pub fn region(name: impl Into<Cow<'static, str>>, policy: Policy) -> Region {
    Region {
        name: name.into(),
        policy,
    }
}

impl Region {
    pub fn call<I, O>(self, inputs: I, body: impl FnOnce(I) -> O) -> O {
        let policy = match self.policy {
            Policy::Save => "save",
            Policy::Recompute => "recompute",
            Policy::Auto => "auto",
        };
        log(format!("{policy} {}", self.name));
        body(inputs)
    }
}

pub fn recompute_needs_tensor(t: &Tensor) {
    log(format!("needs {}", t.0));
}

pub fn is_recomputing() -> bool {
    RECOMPUTING.with(Cell::get)
}

pub mod __private {
    use super::*;

    pub trait IntoRegionInput {
        type Input;
        fn into_region_input(self) -> Self::Input;
    }

    impl<'a> IntoRegionInput for &'a Tensor {
        type Input = &'a Tensor;
        fn into_region_input(self) -> Self::Input {
            self
        }
    }

    impl<'a> IntoRegionInput for Option<&'a Tensor> {
        type Input = Option<&'a Tensor>;
        fn into_region_input(self) -> Self::Input {
            self
        }
    }

    impl<'a> IntoRegionInput for &'a [Tensor] {
        type Input = &'a [Tensor];
        fn into_region_input(self) -> Self::Input {
            self
        }
    }

    impl IntoRegionInput for Tensor {
        type Input = Tensor;
        fn into_region_input(self) -> Self::Input {
            self
        }
    }

    macro_rules! identity {
        ($($t:ty)*) => { $(impl IntoRegionInput for $t {
            type Input = $t;
            fn into_region_input(self) -> Self::Input { self }
        })* };
    }
    identity!(usize i64 f64 bool);

    /// Returns the value itself (its type too): the closure receives the
    /// arguments unchanged, and literal arguments (`f(&x, 3)`) infer their
    /// type from the callee. (`-> T::Input` would fix `3` to `i32`.)
    pub fn input<T: IntoRegionInput<Input = T>>(value: T) -> T {
        value.into_region_input()
    }

    pub struct ScopeGuard(Cow<'static, str>);

    impl Drop for ScopeGuard {
        fn drop(&mut self) {
            log(format!("end {}", self.0));
        }
    }

    pub fn enter_scope(name: impl Into<Cow<'static, str>>) -> ScopeGuard {
        let name = name.into();
        log(format!("scope {name}"));
        ScopeGuard(name)
    }
}

/// One tensor input of a checkpoint, and what the closure receives.
pub trait CheckpointInput {
    type Owned;
    fn owned(&self) -> Self::Owned;
}

impl CheckpointInput for &Tensor {
    type Owned = Tensor;
    fn owned(&self) -> Tensor {
        self.shallow_clone()
    }
}

impl CheckpointInput for Tensor {
    type Owned = Tensor;
    fn owned(&self) -> Tensor {
        self.shallow_clone()
    }
}

impl CheckpointInput for Option<&Tensor> {
    type Owned = Option<Tensor>;
    fn owned(&self) -> Option<Tensor> {
        self.map(Tensor::shallow_clone)
    }
}

impl CheckpointInput for &[Tensor] {
    type Owned = Vec<Tensor>;
    fn owned(&self) -> Vec<Tensor> {
        self.iter().map(Tensor::shallow_clone).collect()
    }
}

pub trait CheckpointInputs {
    type Owned;
    fn owned(&self) -> Self::Owned;
}

macro_rules! inputs {
    ($($t:ident)*) => {
        impl<$($t: CheckpointInput),*> CheckpointInputs for ($($t,)*) {
            type Owned = ($($t::Owned,)*);
            #[allow(non_snake_case, clippy::unused_unit)]
            fn owned(&self) -> Self::Owned {
                let ($($t,)*) = self;
                ($($t.owned(),)*)
            }
        }
    };
}
inputs!();
inputs!(A);
inputs!(A B);
inputs!(A B C);
inputs!(A B C D);

pub trait StateHook: 'static {
    fn name(&self) -> String;
}

pub struct Checkpoint {
    name: Cow<'static, str>,
    hooks: Vec<Box<dyn StateHook>>,
}

pub fn checkpoint(name: impl Into<Cow<'static, str>>) -> Checkpoint {
    Checkpoint {
        name: name.into(),
        hooks: Vec::new(),
    }
}

impl Checkpoint {
    pub fn determinism(self, determinism: Determinism) -> Self {
        let name = match determinism {
            Determinism::None => "None",
            Determinism::Metadata => "Metadata",
            Determinism::Bitwise => "Bitwise",
        };
        log(format!("determinism {name}"));
        self
    }

    /// On or off from the active plan (the real runtime's
    /// `Checkpoint::auto`).
    pub fn auto(self) -> Self {
        log("auto checkpoint");
        self
    }

    pub fn strict_recompute(self, strict: bool) -> Self {
        log(format!("strict {strict}"));
        self
    }

    pub fn state_hook(mut self, hook: impl StateHook) -> Self {
        self.hooks.push(Box::new(hook));
        self
    }

    /// Runs the body, then replays it as backward would.
    pub fn call<I: CheckpointInputs, O>(
        self,
        inputs: I,
        body: impl Fn(I::Owned) -> O + 'static,
    ) -> O {
        let hooks: Vec<String> = self.hooks.iter().map(|h| h.name()).collect();
        log(format!("checkpoint {} {hooks:?}", self.name));
        let out = body(inputs.owned());
        RECOMPUTING.with(|r| r.set(true));
        log("replay");
        drop(body(inputs.owned()));
        RECOMPUTING.with(|r| r.set(false));
        out
    }
}

// ---------------------------------------------------------------- the tests

#[derive(Capture)]
pub struct Linear {
    w: Tensor,
}

impl Linear {
    fn new(w: f64) -> Self {
        Linear { w: Tensor(w) }
    }
    fn forward(&self, x: &Tensor) -> Tensor {
        x + &self.w
    }
    fn scale(&self, x: &Tensor, k: usize) -> Tensor {
        Tensor(x.0 * k as f64)
    }
}

#[derive(Capture)]
pub struct Block {
    index: usize,
    ln1: Linear,
    attention: Linear,
    ln2: Linear,
    mlp: Linear,
}

impl Block {
    fn new() -> Self {
        Block {
            index: 3,
            ln1: Linear::new(1.0),
            attention: Linear::new(10.0),
            ln2: Linear::new(100.0),
            mlp: Linear::new(1000.0),
        }
    }

    /// The example of docs/dsl.md.
    #[checkpoint(name = [format!("layers.{}", self.index)])]
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.ln1.forward(x);
        remat! {
            let attn = save attention: self.attention.forward(&h);
            needs attn;                       // bare code below reads attn
            let x = x + &attn;
            let m = recompute mlp: self.mlp.forward(&self.ln2.forward(&x));
        }
        x + m
    }

    /// Options, every tensor parameter kind, captured parameters, owned
    /// `self`-less forms, scopes, the expression form and loops.
    #[checkpoint(name = "options", determinism = Metadata, state_hooks = [Hook("rng"), Hook("gen")])]
    #[allow(clippy::too_many_arguments)]
    fn options(
        &self,
        x: &Tensor,
        mask: Option<&Tensor>,
        xs: &[Tensor],
        mut k: usize,
        scale: &f64,
        (a, b): (i64, i64),
        y: Tensor,
    ) -> Tensor {
        k += 1;
        let m = mask.map(|m| m + x).unwrap_or_else(|| x.shallow_clone());
        let mut total = remat!(recompute first: self.attention.forward(&m));
        for (i, t) in xs.iter().enumerate() {
            remat! {
                scope [format!("item{i}")] {
                    let out = save [format!("xs.{i}")]: self.mlp.scale(t, k);
                    scope inner {
                        recompute "sum": add(&out, &total);
                    }
                    needs out;
                }
            }
            total = total + out;
        }
        if !is_recomputing() {
            log(format!("forward only {}", *scale));
        }
        let _ = (a, b);
        total + y
    }
}

struct Hook(&'static str);

impl StateHook for Hook {
    fn name(&self) -> String {
        self.0.to_owned()
    }
}

fn add(a: &Tensor, b: &Tensor) -> Tensor {
    a + b
}

#[test]
fn the_dsl_example_runs_its_regions_on_forward_and_replay() {
    take_log();
    let block = Block::new();
    let out = block.forward(&Tensor(0.5));
    // h = 1.5; attn = 11.5; x = 12.0; m = 12 + 100 + 1000; out = x + m.
    assert_eq!(out, Tensor(12.0 + 1112.0));
    assert_eq!(
        take_log(),
        [
            "checkpoint layers.3 []",
            "save attention",
            "needs 11.5",
            "recompute mlp",
            "replay",
            "save attention",
            "needs 11.5",
            "recompute mlp",
        ]
    );
}

#[test]
fn options_and_parameter_kinds() {
    take_log();
    let block = Block::new();
    let xs = [Tensor(1.0), Tensor(2.0)];
    let out = block.options(
        &Tensor(0.0),
        Some(&Tensor(1.0)),
        &xs,
        1,
        &0.5,
        (1, 2),
        Tensor(0.25),
    );
    // total = 1 + 10 = 11; + 1*2 + 2*2 = 17; + 0.25.
    assert_eq!(out, Tensor(17.25));
    let log = take_log();
    let forward: Vec<&str> = log
        .iter()
        .take_while(|l| *l != "replay")
        .map(String::as_str)
        .collect();
    assert_eq!(
        forward,
        [
            "determinism Metadata",
            "checkpoint options [\"rng\", \"gen\"]",
            "recompute first",
            "scope item0",
            "save xs.0",
            "scope inner",
            "recompute sum",
            "end inner",
            "needs 2",
            "end item0",
            "scope item1",
            "save xs.1",
            "scope inner",
            "recompute sum",
            "end inner",
            "needs 4",
            "end item1",
            "forward only 0.5",
        ]
    );
    assert!(!log
        .iter()
        .skip(forward.len())
        .any(|l| l.starts_with("forward only")));
}

/// A free function, an owned receiver, `&Vec<Tensor>`, and `remat!` in
/// nested bare code.
#[checkpoint]
fn free(x: Tensor, ys: &Vec<Tensor>, label: String) -> (Tensor, Tensor) {
    let mut acc = x.shallow_clone();
    for y in ys {
        if y.0 > 0.0 {
            remat! { let z = recompute add(&acc, y); }
            acc = z;
        }
    }
    remat! { let kept = save keep: add(&x, &acc); }
    log(label.clone());
    (kept, acc)
}

#[test]
fn free_functions() {
    take_log();
    let (kept, acc) = free(
        Tensor(1.0),
        &vec![Tensor(1.0), Tensor(-1.0), Tensor(2.0)],
        "label".into(),
    );
    assert_eq!(acc, Tensor(4.0));
    assert_eq!(kept, Tensor(5.0));
    assert_eq!(
        take_log(),
        [
            "checkpoint free []",
            "recompute add",
            "recompute add",
            "save keep",
            "label",
            "replay",
            "recompute add",
            "recompute add",
            "save keep",
            "label",
        ]
    );
}

#[derive(Capture)]
struct Owned(Linear, usize);

impl Owned {
    #[checkpoint(name = "owned")]
    fn run(self, x: &Tensor) -> Tensor {
        let out = remat!(save lin: self.0.forward(x));
        #[remat(unchecked)]
        let copy = out.exp();
        let _ = copy;
        out
    }
}

#[test]
fn owned_receiver_and_unchecked() {
    take_log();
    let out = Owned(Linear::new(1.0), 2).run(&Tensor(1.0));
    assert_eq!(out, Tensor(2.0));
    assert_eq!(
        take_log(),
        ["checkpoint owned []", "save lin", "replay", "save lin"]
    );
}

/// Outside a checkpoint, `remat!` is a block of statements whose bindings
/// stay visible, or an expression.
#[test]
fn standalone_blocks() {
    take_log();
    let lin = Linear::new(1.0);
    let x = Tensor(1.0);
    remat! {
        let a = save first: lin.forward(&x);
        scope outer {
            let b = recompute second: lin.scale(&a, 3);
        }
        needs a;
        let c = &a + &b;
    }
    let d = remat!(recompute "third": lin.forward(&c));
    assert_eq!(d, Tensor(2.0 + 6.0 + 1.0));
    assert_eq!(
        take_log(),
        [
            "save first",
            "scope outer",
            "recompute second",
            "end outer",
            "needs 2",
            "recompute third"
        ]
    );
}

#[derive(Capture)]
struct Generic<T> {
    inner: T,
    count: Rc<usize>,
}

#[derive(Capture)]
struct Unit;

#[derive(Capture)]
enum Choice {
    A(Tensor),
    B { t: Tensor, n: usize },
    C,
}

#[test]
fn derived_capture() {
    let g = Generic {
        inner: Tensor(1.0),
        count: Rc::new(2),
    };
    let c = g.capture();
    assert_eq!(c.inner, Tensor(1.0));
    assert!(Rc::ptr_eq(&c.count, &g.count));
    let Unit = Unit.capture();
    assert!(matches!(Choice::A(Tensor(1.0)).capture(), Choice::A(Tensor(v)) if v == 1.0));
    assert!(matches!(
        Choice::B {
            t: Tensor(2.0),
            n: 3
        }
        .capture(),
        Choice::B { n: 3, .. }
    ));
    assert!(matches!(Choice::C.capture(), Choice::C));
}

// ------------------------------------------- run-time policies, `enabled`

#[derive(Capture)]
pub struct Policies {
    attention: Policy,
    checkpointing: bool,
}

impl Capture for Policy {
    fn capture(&self) -> Self {
        *self
    }
}

impl Policies {
    /// One body for every policy: the region's policy and whether the
    /// checkpoint is on are values.
    #[checkpoint(name = "policies", enabled = self.checkpointing, strict = true)]
    fn forward(&self, x: &Tensor) -> Tensor {
        remat! {
            let attn = region [self.attention] attention: add(x, x);
            needs attn;
        }
        attn.exp()
    }
}

#[test]
fn run_time_policies_and_enabled() {
    for (policy, name) in [(Policy::Save, "save"), (Policy::Recompute, "recompute")] {
        take_log();
        let p = Policies {
            attention: policy,
            checkpointing: true,
        };
        assert_eq!(p.forward(&Tensor(0.5)), Tensor(1.0f64.exp()));
        assert_eq!(
            take_log(),
            [
                "strict true".to_owned(),
                "checkpoint policies []".to_owned(),
                format!("{name} attention"),
                "needs 1".to_owned(),
                "replay".to_owned(),
                format!("{name} attention"),
                "needs 1".to_owned(),
            ]
        );
        // Off: the body once, as a plain call; its regions still run.
        let p = Policies {
            attention: policy,
            checkpointing: false,
        };
        assert_eq!(p.forward(&Tensor(0.5)), Tensor(1.0f64.exp()));
        assert_eq!(
            take_log(),
            [format!("{name} attention"), "needs 1".to_owned()]
        );
    }
}

// ------------------------------------------------- `auto` regions and checkpoints

pub struct Planned;

impl Capture for Planned {
    fn capture(&self) -> Self {
        Planned
    }
}

impl Planned {
    /// `#[checkpoint(auto)]` and `auto` regions, statement and expression.
    #[checkpoint(name = "planned", auto, strict = true)]
    fn forward(&self, x: &Tensor) -> Tensor {
        remat! {
            let attn = auto attention: add(x, x);
            needs attn;
        }
        let m = remat!(auto mlp: add(&attn, x));
        remat! { needs m; }
        attn.exp() + m
    }
}

#[test]
fn auto_regions_and_checkpoints() {
    take_log();
    let out = Planned.forward(&Tensor(0.5));
    assert_eq!(out, Tensor(1.0f64.exp() + 1.5));
    assert_eq!(
        take_log(),
        [
            "strict true",
            "auto checkpoint",
            "checkpoint planned []",
            "auto attention",
            "needs 1",
            "auto mlp",
            "needs 1.5",
            "replay",
            "auto attention",
            "needs 1",
            "auto mlp",
            "needs 1.5",
        ]
    );
    // A standalone block, outside any checkpoint.
    take_log();
    let x = Tensor(2.0);
    remat! {
        let y = auto add(&x, &x);
    }
    assert_eq!(y, Tensor(4.0));
    assert_eq!(take_log(), ["auto add"]);
}
