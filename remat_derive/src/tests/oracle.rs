//! The check against an execution oracle: random checkpoint bodies (lets of
//! `save`/`recompute` regions with tuple outputs, assignments to locals and
//! fields, directly and through `&mut` re-borrows, views and copies by `i`
//! (a range, a tensor index), pieces of `chunk`, branches, `is_recomputing()` branches, loops
//! carrying values, `needs` placed or not, regions consuming values, bare
//! reads, labelled blocks and `break`s out of them, shadowing `let`s under
//! `#[cfg]`, a `Vec` output with its elements marked, stored, read by index
//! and in `for` loops; `oracle_program` draws and renders them) go through the
//! check, and through a small interpreter that simulates the runtime in two
//! passes: on the forward it records what `needs` and `recompute` regions
//! ask to keep; on replay every other `save` output is a placeholder, and a
//! bare read of one is the error.
//! Each program runs for several concrete branch and loop choices.
//!
//! Asserted: every program the check accepts runs without a placeholder
//! read. Reported (not asserted): how many the check refuses that never
//! fail (its false positives).

use std::cell::Cell;
use std::collections::HashSet;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use quote::quote;

use super::oracle_program::{render, stmt, Stmt, VARS};

/// What a variable holds on the forward: a computed tensor, or element
/// `elem` (`None` for a one-tensor output) of the `id`th save output.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Val {
    Other,
    Saved(usize, Option<usize>),
}

struct Oracle<'a> {
    choices: &'a [usize],
    next_choice: Cell<usize>,
    vars: [Val; VARS],
    fields: [Val; 2],
    /// The `Vec` local `p`'s two elements.
    elems: [Val; 2],
    instances: usize,
    kept: HashSet<Val>,
    read: Vec<Val>,
    steps: usize,
    /// Labelled blocks entered and not left.
    blocks: usize,
    /// This pass is recomputation (else the forward).
    replay: bool,
    /// Per block being run: the variables a `let` shadowed in it, with the
    /// values they get back at its end.
    shadows: Vec<Vec<(usize, Val)>>,
}

impl Oracle<'_> {
    fn choice(&self) -> usize {
        let i = self.next_choice.get();
        self.next_choice.set(i + 1);
        self.choices[i % self.choices.len()]
    }

    /// Runs the block `stmts`; true when a `break` leaves the innermost
    /// labelled block.
    fn run(&mut self, stmts: &[Stmt]) -> bool {
        self.shadows.push(Vec::new());
        let left = self.run_stmts(stmts);
        for (a, old) in self.shadows.pop().unwrap_or_default().into_iter().rev() {
            self.vars[a] = old;
        }
        left
    }

    fn run_stmts(&mut self, stmts: &[Stmt]) -> bool {
        for s in stmts {
            self.steps += 1;
            match s {
                Stmt::Save(a) => {
                    self.instances += 1;
                    self.vars[*a] = Val::Saved(self.instances, None);
                }
                Stmt::SaveTuple(a, b) => {
                    self.instances += 1;
                    self.vars[*a] = Val::Saved(self.instances, Some(0));
                    self.vars[*b] = Val::Saved(self.instances, Some(1));
                }
                Stmt::Recompute(a, b) => {
                    // A recompute region keeps its inputs for replay.
                    self.kept.insert(self.vars[*b]);
                    self.vars[*a] = Val::Other;
                }
                // A view, or a piece of one: the same storage, which is
                // what the runtime keeps.
                Stmt::Copy(a, b) | Stmt::IndexView(a, b) | Stmt::Piece(a, b, _) => {
                    self.vars[*a] = self.vars[*b]
                }
                Stmt::IndexCopy(a, b) => {
                    self.read.push(self.vars[*b]);
                    self.vars[*a] = Val::Other;
                }
                Stmt::Plain(a) => self.vars[*a] = Val::Other,
                Stmt::Store(f, a) | Stmt::StoreRef(f, a, _) => self.fields[*f] = self.vars[*a],
                Stmt::Load(a, f) => self.vars[*a] = self.fields[*f],
                Stmt::Needs(a) => {
                    self.kept.insert(self.vars[*a]);
                }
                Stmt::Read(a) => self.read.push(self.vars[*a]),
                Stmt::ReadField(f) => self.read.push(self.fields[*f]),
                // Branch and loop choices are drawn in the order the
                // statements run; the renderer numbers them in source
                // order, which the check does not look at.
                Stmt::If(a, b) => {
                    let arm = if self.choice() % 2 == 0 { a } else { b };
                    if self.run(arm) {
                        return true;
                    }
                }
                Stmt::Loop(body) => {
                    for _ in 0..self.choice() % 3 {
                        if self.run(body) {
                            return true;
                        }
                    }
                }
                Stmt::Labelled(body) => {
                    self.blocks += 1;
                    self.run(body);
                    self.blocks -= 1;
                }
                Stmt::Phased(not, a, b) => {
                    // `!is_recomputing()` holds on the forward.
                    let arm = if *not != self.replay { a } else { b };
                    self.run(arm);
                }
                Stmt::CfgLet(a) => {
                    if self.choice() % 2 == 0 {
                        let frame = self.shadows.last_mut().expect("in a block");
                        if !frame.iter().any(|(v, _)| v == a) {
                            frame.push((*a, self.vars[*a]));
                        }
                        self.vars[*a] = Val::Other;
                    }
                }
                // The elements of a `Vec` output are separate tensors.
                Stmt::SaveVec => {
                    self.instances += 1;
                    self.elems = [0, 1].map(|k| Val::Saved(self.instances, Some(k)));
                }
                Stmt::NeedsVec => self.kept.extend(self.elems),
                Stmt::NeedsElem(k) => {
                    self.kept.insert(self.elems[*k]);
                }
                Stmt::ReadElem(k) => self.read.push(self.elems[*k]),
                Stmt::StoreElem(k, a) => self.elems[*k] = self.vars[*a],
                Stmt::ForRead(marked) => {
                    for v in self.elems {
                        if *marked {
                            self.kept.insert(v);
                        }
                        self.read.push(v);
                    }
                }
                Stmt::ForLoad(a) => self.vars[*a] = self.elems[1],
                Stmt::Leave => {
                    if self.blocks > 0 && self.choice() % 2 == 0 {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Whether replay reads a placeholder: the runtime keeps what the
    /// forward asked for, whenever it asked.
    fn fails(&self, kept: &HashSet<Val>) -> bool {
        self.read
            .iter()
            .any(|v| matches!(v, Val::Saved(..)) && !kept.contains(v))
    }
}

fn oracle_fails(stmts: &[Stmt], choices: &[usize]) -> bool {
    let pass = |replay| {
        let mut oracle = Oracle {
            choices,
            next_choice: Cell::new(0),
            vars: [Val::Other; VARS],
            fields: [Val::Other; 2],
            elems: [Val::Other; 2],
            instances: 0,
            kept: HashSet::new(),
            read: Vec::new(),
            steps: 0,
            blocks: 0,
            replay,
            shadows: Vec::new(),
        };
        oracle.run(stmts);
        oracle
    };
    // The forward asks what to keep; recomputation reads, with the same
    // choices outside `is_recomputing()` branches.
    let (forward, replay) = (pass(false), pass(true));
    replay.fails(&forward.kept)
}

fn check_accepts(stmts: &[Stmt]) -> bool {
    let out = crate::checkpoint::checkpoint(quote!(), render(stmts));
    super::errors(&out).is_empty()
}

thread_local! {
    static STATS: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
}

/// 1500 cases, or `PROPTEST_CASES` for a longer hunt.
fn config() -> ProptestConfig {
    let default = ProptestConfig::default();
    ProptestConfig {
        cases: match std::env::var_os("PROPTEST_CASES") {
            Some(_) => default.cases,
            None => 1500,
        },
        failure_persistence: None,
        ..default
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn accepted_programs_never_read_a_placeholder(
        stmts in prop::collection::vec(stmt(), 1..10),
        runs in prop::collection::vec(prop::collection::vec(0..6usize, 1..8), 12),
    ) {
        let accepted = check_accepts(&stmts);
        let mut fixed = vec![vec![0], vec![1], vec![2], vec![0, 1, 2], vec![2, 1, 0], vec![1, 2]];
        fixed.extend(runs);
        let fails = fixed.iter().any(|choices| oracle_fails(&stmts, choices));
        prop_assert!(
            !(accepted && fails),
            "the check accepts a program that reads a placeholder:\n{}",
            render(&stmts)
        );
        STATS.with(|s| {
            let (total, refused, false_positives) = s.get();
            s.set((
                total + 1,
                refused + usize::from(!accepted),
                false_positives + usize::from(!accepted && !fails),
            ));
        });
    }
}

/// Runs after the property (test names sort it after): prints the rates.
#[test]
fn report_false_positive_rate() {
    // Each test runs on its own thread: run a fixed sample here.
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let (mut total, mut refused, mut fp, mut unsound) = (0, 0, 0, 0);
    let strategy = prop::collection::vec(stmt(), 1..10);
    for _ in 0..400 {
        let stmts = strategy.new_tree(&mut runner).expect("tree").current();
        let accepted = check_accepts(&stmts);
        let choices: Vec<Vec<usize>> = (0..24)
            .map(|i| (0..6).map(|j| (i * 7 + j * 3 + i / 3) % 6).collect())
            .collect();
        let fails = choices.iter().any(|c| oracle_fails(&stmts, c));
        total += 1;
        refused += usize::from(!accepted);
        fp += usize::from(!accepted && !fails);
        unsound += usize::from(accepted && fails);
    }
    println!(
        "oracle sample: {total} programs, {refused} refused by the check, {fp} of them never \
         fail in the oracle (false positives: {:.1}% of refusals), {unsound} accepted but failing",
        100.0 * fp as f64 / refused.max(1) as f64
    );
    assert_eq!(unsound, 0);
}
