//! The expansions compile and run against a mock of the runtime's API.
//!
//! The macros name the runtime as `::remat::...`; this test crate calls
//! itself `remat` and provides the items the expansion references, with the
//! signatures the real runtime has, so that hygiene, borrows, closure kinds
//! (`Fn + 'static`), the visibility of bindings and the types bare code
//! receives (`Saved` for the output of a region that may be skipped, until
//! `needs` marks it; docs/dsl.md, section Y) are checked by rustc. The mock
//! runs every checkpoint body twice (forward, then a replay).

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
    /// The real runtime's `Region::call`: save outputs among the inputs
    /// reach the body opened.
    pub fn call<I: saved::RegionArg, O: RegionOutput>(
        self,
        inputs: I,
        body: impl FnOnce(I::Opened) -> O,
    ) -> O {
        let policy = match self.policy {
            Policy::Save => "save",
            Policy::Recompute => "recompute",
            Policy::Auto => "auto",
        };
        log(format!("{policy} {}", self.name));
        body(inputs.open())
    }

    /// A region that may be skipped: its output wrapped.
    pub fn call_saved<I: saved::RegionArg, O: RegionOutput>(
        self,
        inputs: I,
        body: impl FnOnce(I::Opened) -> O,
    ) -> O::Saved {
        self.call(inputs, body).into_saved()
    }
}

pub fn is_recomputing() -> bool {
    RECOMPUTING.with(Cell::get)
}

/// What a region takes as input (the real runtime's `RegionInput`): the
/// mock logs the tensors `needs` marks through it.
pub trait RegionInput {
    fn visit(&self, f: &mut dyn FnMut(&Tensor));
}

impl RegionInput for Tensor {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        f(self)
    }
}

impl<T: RegionInput + ?Sized> RegionInput for &T {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        (**self).visit(f)
    }
}

impl<T: RegionInput> RegionInput for Option<T> {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        if let Some(t) = self {
            t.visit(f)
        }
    }
}

impl<T: RegionInput> RegionInput for [T] {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        self.iter().for_each(|t| t.visit(f))
    }
}

impl<T: RegionInput> RegionInput for Vec<T> {
    fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
        self.as_slice().visit(f)
    }
}

macro_rules! opaque_inputs {
    ($($t:ty)*) => { $(impl RegionInput for $t {
        fn visit(&self, _: &mut dyn FnMut(&Tensor)) {}
    })* };
}
opaque_inputs!(usize i32 i64 f64 bool);

macro_rules! tuple_inputs {
    ($($t:ident)*) => {
        impl<$($t: RegionInput),*> RegionInput for ($($t,)*) {
            #[allow(non_snake_case, unused_variables)]
            fn visit(&self, f: &mut dyn FnMut(&Tensor)) {
                let ($($t,)*) = self;
                $($t.visit(f);)*
            }
        }
    };
}
tuple_inputs!();
tuple_inputs!(A);
tuple_inputs!(A B);
tuple_inputs!(A B C);

/// What a region returns (the real runtime's `RegionOutput`), and how bare
/// code receives it from a region that may be skipped: wrapped, item by
/// item.
pub trait RegionOutput: Sized + 'static {
    type Saved;
    fn into_saved(self) -> Self::Saved;
}

/// One item of a region's tuple or `Vec` output.
pub trait OutputItem: Sized + 'static {
    type Saved;
    fn into_saved(self) -> Self::Saved;
}

impl OutputItem for Tensor {
    type Saved = Saved<Tensor>;
    fn into_saved(self) -> Saved<Tensor> {
        Saved::new(self)
    }
}

impl OutputItem for Option<Tensor> {
    type Saved = Option<Saved<Tensor>>;
    fn into_saved(self) -> Option<Saved<Tensor>> {
        self.map(Saved::new)
    }
}

impl RegionOutput for Tensor {
    type Saved = Saved<Tensor>;
    fn into_saved(self) -> Saved<Tensor> {
        Saved::new(self)
    }
}

impl RegionOutput for Option<Tensor> {
    type Saved = Option<Saved<Tensor>>;
    fn into_saved(self) -> Option<Saved<Tensor>> {
        self.map(Saved::new)
    }
}

impl<T: OutputItem> RegionOutput for Vec<T> {
    type Saved = Vec<T::Saved>;
    fn into_saved(self) -> Vec<T::Saved> {
        self.into_iter().map(OutputItem::into_saved).collect()
    }
}

impl<A: OutputItem, B: OutputItem> RegionOutput for (A, B) {
    type Saved = (A::Saved, B::Saved);
    fn into_saved(self) -> Self::Saved {
        (self.0.into_saved(), self.1.into_saved())
    }
}

pub use saved::{needs, CheckpointOutput, Needs, RegionArg, Saved};

/// `Saved` and every way out of it, in a module of its own so that the
/// rest of this file (the tests included) cannot read its value either.
mod saved {
    use std::marker::PhantomData;

    use super::{log, RegionInput, Tensor};

    /// The output of a region that may be skipped on recomputation, as bare
    /// code receives it: metadata only, until `needs` marks it.
    pub struct Saved<T> {
        value: T,
        /// Not `Send`, as the real runtime's.
        _not_send: PhantomData<*const ()>,
    }

    impl<T> Saved<T> {
        pub fn new(value: T) -> Self {
            Saved {
                value,
                _not_send: PhantomData,
            }
        }
    }

    impl Saved<Tensor> {
        /// Metadata: readable while recomputing too.
        pub fn size(&self) -> Vec<i64> {
            self.value.size()
        }

        /// A view, itself a save output.
        pub fn view(&self, shape: [i64; 1]) -> Saved<Tensor> {
            Saved::new(self.value.view(shape))
        }

        /// The value on the forward, `None` while recomputing.
        pub fn on_forward(&self) -> Option<Tensor> {
            (!super::is_recomputing()).then(|| self.value.shallow_clone())
        }
    }

    impl std::fmt::Debug for Saved<Tensor> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Saved")
                .field("size", &self.value.size())
                .finish()
        }
    }

    fn asked(value: &dyn RegionInput) {
        value.visit(&mut |t| log(format!("needs {}", t.0)));
    }

    /// What `needs` takes: a save output, a reference to one, or an
    /// `Option`, `Vec` or pair of them.
    pub trait Needs {
        type Marked;
        fn mark(self) -> Self::Marked;
    }

    pub fn needs<T: Needs>(value: T) -> T::Marked {
        value.mark()
    }

    impl<T: RegionInput> Needs for Saved<T> {
        type Marked = T;
        fn mark(self) -> T {
            asked(&self.value);
            self.value
        }
    }

    impl<'a, T: RegionInput> Needs for &'a Saved<T> {
        type Marked = &'a T;
        fn mark(self) -> &'a T {
            asked(&self.value);
            &self.value
        }
    }

    impl<'a, T: RegionInput> Needs for &'a mut Saved<T> {
        type Marked = &'a mut T;
        fn mark(self) -> &'a mut T {
            asked(&self.value);
            &mut self.value
        }
    }

    impl<M: Needs> Needs for Option<M> {
        type Marked = Option<M::Marked>;
        fn mark(self) -> Option<M::Marked> {
            self.map(M::mark)
        }
    }

    impl<T: RegionInput> Needs for Vec<Saved<T>> {
        type Marked = Vec<T>;
        fn mark(self) -> Vec<T> {
            self.into_iter().map(Saved::mark).collect()
        }
    }

    impl<A: Needs, B: Needs> Needs for (A, B) {
        type Marked = (A::Marked, B::Marked);
        fn mark(self) -> Self::Marked {
            (self.0.mark(), self.1.mark())
        }
    }

    /// What a `remat!` region takes as one argument: an input, or a save
    /// output, which its body receives opened.
    pub trait RegionArg {
        type Opened: RegionInput;
        fn open(self) -> Self::Opened;
    }

    impl<T: RegionInput> RegionArg for T {
        type Opened = T;
        fn open(self) -> T {
            self
        }
    }

    impl<T: RegionInput> RegionArg for Saved<T> {
        type Opened = T;
        fn open(self) -> T {
            self.value
        }
    }

    impl<'a, T: RegionInput> RegionArg for &'a Saved<T> {
        type Opened = &'a T;
        fn open(self) -> &'a T {
            &self.value
        }
    }

    impl<'a, T: RegionInput> RegionArg for Option<&'a Saved<T>> {
        type Opened = Option<&'a T>;
        fn open(self) -> Option<&'a T> {
            self.map(|s| &s.value)
        }
    }

    impl<T: RegionInput> RegionArg for Vec<Saved<T>> {
        type Opened = Vec<T>;
        fn open(self) -> Vec<T> {
            self.into_iter().map(|s| s.value).collect()
        }
    }

    /// One argument of a region call whose tuple holds save outputs.
    pub struct Arg<A>(pub A);

    macro_rules! tuple_args {
        ($($t:ident)*) => {
            impl<$($t: RegionArg),*> RegionArg for ($(Arg<$t>,)*) {
                type Opened = ($($t::Opened,)*);
                #[allow(non_snake_case, clippy::unused_unit)]
                fn open(self) -> Self::Opened {
                    let ($(Arg($t),)*) = self;
                    ($($t.open(),)*)
                }
            }
        };
    }
    tuple_args!(A);
    tuple_args!(A B);
    tuple_args!(A B C);

    /// What a checkpoint's closure may return: tensors, or save outputs of
    /// the checkpoint, which the caller receives as tensors.
    pub trait CheckpointOutput {
        type Output;
        fn into_output(self) -> Self::Output;
    }

    /// One item of a checkpoint's tuple or `Vec` output.
    pub trait CheckpointOutputItem {
        type Item;
        fn into_item(self) -> Self::Item;
    }

    impl CheckpointOutputItem for Tensor {
        type Item = Tensor;
        fn into_item(self) -> Tensor {
            self
        }
    }

    impl CheckpointOutputItem for Saved<Tensor> {
        type Item = Tensor;
        fn into_item(self) -> Tensor {
            self.value
        }
    }

    impl CheckpointOutputItem for Option<Tensor> {
        type Item = Option<Tensor>;
        fn into_item(self) -> Option<Tensor> {
            self
        }
    }

    impl CheckpointOutputItem for Option<Saved<Tensor>> {
        type Item = Option<Tensor>;
        fn into_item(self) -> Option<Tensor> {
            self.map(|s| s.value)
        }
    }

    impl<T: CheckpointOutputItem> CheckpointOutput for T {
        type Output = T::Item;
        fn into_output(self) -> T::Item {
            self.into_item()
        }
    }

    impl<T: CheckpointOutputItem> CheckpointOutput for Vec<T> {
        type Output = Vec<T::Item>;
        fn into_output(self) -> Vec<T::Item> {
            self.into_iter().map(T::into_item).collect()
        }
    }

    impl<A: CheckpointOutputItem, B: CheckpointOutputItem> CheckpointOutput for (A, B) {
        type Output = (A::Item, B::Item);
        fn into_output(self) -> Self::Output {
            (self.0.into_item(), self.1.into_item())
        }
    }
}

pub mod __private {
    use super::*;

    pub use crate::saved::Arg;

    /// One region argument, checked where it is written.
    pub fn arg<A: RegionArg>(value: A) -> Arg<A> {
        Arg(value)
    }

    /// A `#[checkpoint]` body's value, inside its checkpoint.
    pub fn returned<O: CheckpointOutput>(value: O) -> O::Output {
        value.into_output()
    }

    /// A `#[checkpoint]` body's value where the checkpoint is off.
    pub fn returned_plain<O: CheckpointOutput>(value: O) -> O::Output {
        log("returned plain");
        value.into_output()
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

    /// Runs the body, then replays it as backward would. The body may
    /// return its own save outputs; the caller receives tensors.
    pub fn call<I: CheckpointInputs, O: CheckpointOutput>(
        self,
        inputs: I,
        body: impl Fn(I::Owned) -> O + 'static,
    ) -> O::Output {
        let hooks: Vec<String> = self.hooks.iter().map(|h| h.name()).collect();
        log(format!("checkpoint {} {hooks:?}", self.name));
        let out = body(inputs.owned());
        RECOMPUTING.with(|r| r.set(true));
        log("replay");
        drop(body(inputs.owned()));
        RECOMPUTING.with(|r| r.set(false));
        out.into_output()
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
    /// A save output read on the forward only, unmarked, and returned.
    #[checkpoint(name = "owned")]
    fn run(self, x: &Tensor) -> Tensor {
        let out = remat!(save lin: self.0.forward(x));
        let copy = out.on_forward().map(|t| t.exp());
        log(format!("on forward {copy:?}"));
        out
    }
}

#[test]
fn owned_receiver_and_on_forward() {
    take_log();
    let out = Owned(Linear::new(1.0), 2).run(&Tensor(1.0));
    assert_eq!(out, Tensor(2.0));
    assert_eq!(
        take_log(),
        [
            "checkpoint owned []",
            "save lin",
            "on forward Some(Tensor(7.38905609893065))",
            "replay",
            "save lin",
            "on forward None",
        ]
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
    /// Off, the body's save output leaves through `returned_plain`.
    #[checkpoint(name = "policies", enabled = self.checkpointing, strict = true)]
    fn forward(&self, x: &Tensor) -> Tensor {
        remat! {
            let attn = region [self.attention] attention: add(x, x);
            needs attn;
        }
        remat!(save out: attn.exp())
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
                "save out".to_owned(),
                "replay".to_owned(),
                format!("{name} attention"),
                "needs 1".to_owned(),
                "save out".to_owned(),
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
            [
                format!("{name} attention"),
                "needs 1".to_owned(),
                "save out".to_owned(),
                "returned plain".to_owned(),
            ]
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
        needs y;
    }
    assert_eq!(y, Tensor(4.0));
    assert_eq!(take_log(), ["auto add", "needs 4"]);
}

// ------------------------------------ the guarantee, by types (docs/dsl.md, T)

fn split(x: &Tensor) -> (Tensor, Tensor) {
    (x.shallow_clone(), x + x)
}

fn chunks(x: &Tensor) -> Vec<Tensor> {
    vec![x.shallow_clone(), x + x, x + &(x + x)]
}

fn maybe(x: &Tensor, some: bool) -> Option<Tensor> {
    some.then(|| x.shallow_clone())
}

fn add_maybe(x: &Tensor, y: Option<&Tensor>) -> Tensor {
    y.map_or_else(|| x.shallow_clone(), |y| x + y)
}

fn consume(x: Tensor) -> Tensor {
    x
}

/// Only a `recompute` region hands bare code its output readable; the
/// others hand it a `Saved`, whose metadata and views need no mark, and
/// which bare code reads after `needs` (docs/dsl.md, rules Y1, Y2 and Y5). What used to
/// be the check's error is now a type error: without the `needs`, `&s + &r`
/// below does not compile.
#[test]
fn save_outputs_reach_bare_code_wrapped_until_marked() {
    take_log();
    let x = Tensor(1.0);
    let policy = Policy::Recompute;
    remat! {
        let s = save first: add(&x, &x);
        let r = recompute second: add(&x, &x);
        let a = auto third: add(&x, &x);
        let d = region [policy] fourth: add(&x, &x);
    }
    let s: Saved<Tensor> = s;
    let r: Tensor = r;
    let a: Saved<Tensor> = a;
    // Wrapped whatever policy the run-time value picks.
    let d: Saved<Tensor> = d;
    assert_eq!(s.size(), [1]);
    let v: Saved<Tensor> = s.view([-1]);
    assert_eq!(format!("{v:?}"), "Saved { size: [1] }");
    // `needs x;` rebinds the name to the marked, plain value.
    remat! { needs s, a; }
    let s: Tensor = s;
    assert_eq!(&s + &r, Tensor(4.0));
    assert_eq!(a, Tensor(2.0));
    // The expression form marks where it reads, through a reference too.
    let d: &Tensor = needs(&d);
    assert_eq!(*d, Tensor(2.0));
    assert_eq!(
        take_log(),
        [
            "save first",
            "recompute second",
            "auto third",
            "recompute fourth",
            "needs 2",
            "needs 2",
            "needs 2",
        ]
    );
}

/// Tuple, `Vec` and `Option` outputs are wrapped item by item, and `needs`
/// on a collection marks every tensor in it.
#[test]
fn collection_outputs_are_wrapped_item_by_item() {
    take_log();
    let x = Tensor(1.0);
    remat! {
        let (p, q) = save pair: split(&x);
        let parts = save parts: chunks(&x);
        let some = save some: maybe(&x, true);
        let none = save none: maybe(&x, false);
    }
    let (p, q): (Saved<Tensor>, Saved<Tensor>) = (p, q);
    let parts: Vec<Saved<Tensor>> = parts;
    let some: Option<Saved<Tensor>> = some;
    assert!(none.is_none());
    remat! { needs parts, some; }
    let parts: Vec<Tensor> = parts;
    assert_eq!(parts, [Tensor(1.0), Tensor(2.0), Tensor(3.0)]);
    assert_eq!(some, Some(Tensor(1.0)));
    let (p, q): (Tensor, Tensor) = needs((p, q));
    assert_eq!((p, q), (Tensor(1.0), Tensor(2.0)));
    assert_eq!(
        take_log(),
        [
            "save pair",
            "save parts",
            "save some",
            "save none",
            "needs 1",
            "needs 2",
            "needs 3",
            "needs 1",
            "needs 1",
            "needs 2",
        ]
    );
}

/// A region's arguments may be save outputs, which its body receives
/// opened, unmarked: passing them to a region is the mark (docs/dsl.md, rule Y3).
#[test]
fn save_outputs_as_region_arguments() {
    take_log();
    let x = Tensor(1.0);
    remat! {
        let s = save first: add(&x, &x);
        let m = save maybe: maybe(&x, true);
        let t = recompute by_ref: add(&s, &x);
        let u = recompute by_option: add_maybe(&t, m.as_ref());
        let w = recompute nested: add(&remat!(save inner: add(&x, &x)), &u);
        let o = recompute owned: consume(s);
    }
    let _: (&Tensor, &Tensor, &Tensor) = (&t, &u, &w);
    assert_eq!(
        (t, u, w, o),
        (Tensor(3.0), Tensor(4.0), Tensor(6.0), Tensor(2.0))
    );
    assert_eq!(
        take_log(),
        [
            "save first",
            "save maybe",
            "recompute by_ref",
            "recompute by_option",
            "save inner",
            "recompute nested",
            "recompute owned",
        ]
    );
}

/// A save output returned from a checkpoint leaves it as a tensor, from
/// every return position (docs/dsl.md, rule Y4).
#[checkpoint]
fn branches(x: &Tensor, n: usize) -> (Tensor, Tensor) {
    remat! {
        let a = save first: add(x, x);
        let b = recompute second: add(&a, x);
    }
    if n == 0 {
        return (a, b);
    }
    match n {
        1 => (b, a),
        _ => (remat!(save third: add(x, x)), a),
    }
}

#[checkpoint]
fn all_parts(x: &Tensor) -> Vec<Tensor> {
    remat! { let parts = save parts: chunks(x); }
    parts
}

#[test]
fn save_outputs_leave_a_checkpoint_as_tensors() {
    take_log();
    let x = Tensor(1.0);
    assert_eq!(branches(&x, 0), (Tensor(2.0), Tensor(3.0)));
    assert_eq!(branches(&x, 1), (Tensor(3.0), Tensor(2.0)));
    assert_eq!(branches(&x, 2), (Tensor(2.0), Tensor(2.0)));
    assert_eq!(all_parts(&x), [Tensor(1.0), Tensor(2.0), Tensor(3.0)]);
    let log = take_log();
    assert_eq!(log.iter().filter(|l| *l == "replay").count(), 4);
    assert!(!log.iter().any(|l| l.starts_with("needs")), "{log:?}");
}

macro_rules! doubled {
    ($x:expr) => {
        remat!(save doubled: add($x, $x))
    };
}

/// `remat!` written by other macros, defined outside the body or inside
/// it: rustc expands them, and the types hold there too.
#[checkpoint]
fn through_macros(x: &Tensor) -> Tensor {
    macro_rules! plus {
        ($a:expr, $b:expr) => {
            remat!(recompute plus: add($a, $b))
        };
    }
    let d = doubled!(x);
    let e = plus!(&d, x);
    let e = plus!(&e, &needs(&d).shallow_clone());
    log(format!("e {}", e.0));
    d
}

#[test]
fn remat_from_macros() {
    take_log();
    assert_eq!(through_macros(&Tensor(1.0)), Tensor(2.0));
    let forward = [
        "save doubled",
        "recompute plus",
        "needs 2",
        "recompute plus",
        "e 5",
    ];
    let mut expected = vec!["checkpoint through_macros []"];
    expected.extend(forward);
    expected.push("replay");
    expected.extend(forward);
    assert_eq!(take_log(), expected);
}
