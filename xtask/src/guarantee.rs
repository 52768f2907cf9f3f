//! `cargo xtask guarantee`: random programs against the compile-time
//! guarantee of docs/dsl.md, section Y, which rustc enforces with types.
//!
//! Each program is a `#[checkpoint]` function in ordinary model shapes
//! (regions of every policy over plain and save outputs, tuple and `Vec`
//! outputs, views, loops carrying values, branches, nested `remat!`,
//! forward-only reads, save outputs returned) whose bare reads are marked
//! as the types require. Two claims are tested on them:
//!
//! - whatever compiles recomputes without reading a placeholder: the
//!   programs run under strict recomputation (every save output nobody
//!   asked for comes back as a placeholder), for both branches and both
//!   run-time policies, and their gradients equal those of the same body
//!   without a checkpoint, bit for bit (`ui-tests/pass/generated_programs.rs`,
//!   run by `tests/ui_pass.rs`);
//! - a mark removed no longer compiles: every program once per `needs`,
//!   with that `needs` taken away, each a function of its own, and each must
//!   get an error from rustc (`ui-tests/fail/generated_mutants.rs`, whose
//!   `.stderr` `tests/ui.rs` compares).
//!
//! The committed files are the default seed's; `--seed S --count N` runs
//! another round (both tests, then the check that every mutant failed) and
//! puts the default files back. The generator is deterministic: a seed
//! gives the same programs on every machine.

use std::fmt::Write;
use std::fs;
use std::process::Command;

use crate::paths::repo_root;
use crate::run::run;
use crate::Result;

const DEFAULT_SEED: u64 = 39;
const DEFAULT_COUNT: usize = 24;
const PASS_FILE: &str = "ui-tests/pass/generated_programs.rs";
const FAIL_FILE: &str = "ui-tests/fail/generated_mutants.rs";

/// xorshift64*: enough randomness for shapes, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    Plain,
    Saved,
}

/// One generated program: its body as lines, and where its marks are.
struct Program {
    lines: Vec<String>,
    /// Each mark, by its line.
    marks: Vec<(usize, Mark)>,
}

/// A mark, and how its mutant takes it away.
enum Mark {
    /// The line is a mark: the mutant has this line instead (empty: none).
    Line(String),
    /// `::remat::needs(&v)` in the line: the mutant has `(&v)` there.
    Expr(String),
}

struct Gen<'a> {
    rng: &'a mut Rng,
    lines: Vec<String>,
    marks: Vec<(usize, Mark)>,
    vars: Vec<(String, State)>,
    /// Expression-form marks read for the statement being built: bound to
    /// its line when the line is pushed.
    pending: Vec<String>,
    next: usize,
    depth: usize,
}

impl Gen<'_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn line(&mut self, text: String) {
        let indent = "    ".repeat(self.depth + 1);
        let at = self.lines.len();
        for mark in std::mem::take(&mut self.pending) {
            self.marks.push((at, Mark::Expr(mark)));
        }
        self.lines.push(format!("{indent}{text}"));
    }

    /// A `needs` statement for `var`; the mutant drops it.
    fn mark(&mut self, var: &str) {
        // Not through `line`: the pending expression marks belong to the
        // statement after this one.
        let indent = "    ".repeat(self.depth + 1);
        self.lines
            .push(format!("{indent}remat! {{ needs {var}; }}"));
        self.marks
            .push((self.lines.len() - 1, Mark::Line(String::new())));
    }

    fn pick(&mut self) -> (String, State) {
        let i = self.rng.below(self.vars.len());
        self.vars[i].clone()
    }

    fn policy(&mut self) -> (&'static str, State) {
        match self.rng.below(4) {
            0 => ("save", State::Saved),
            1 => ("recompute", State::Plain),
            2 => ("auto", State::Saved),
            _ => ("region [p]", State::Saved),
        }
    }

    /// A bare read of `var`: marked first if it is a save output. The
    /// expression form marks in place and leaves the name wrapped.
    fn read(&mut self, var: &str, state: State) -> String {
        match state {
            State::Plain => var.to_string(),
            State::Saved if self.rng.chance(30) => {
                // The mutant reads it unmarked: `(&v)` has no tensor methods.
                let read = format!("::remat::needs(&{var})");
                self.pending.push(read.clone());
                read
            }
            State::Saved => {
                self.mark(var);
                self.set(var, State::Plain);
                var.to_string()
            }
        }
    }

    fn state(&self, var: &str) -> State {
        self.vars
            .iter()
            .find(|v| v.0 == var)
            .map_or(State::Plain, |v| v.1)
    }

    fn set(&mut self, var: &str, state: State) {
        for v in &mut self.vars {
            if v.0 == var {
                v.1 = state;
            }
        }
    }

    fn stmt(&mut self) {
        match self.rng.below(9) {
            // A region over one or two values, plain or saved: a save output
            // passed to a region is opened for its body (docs/dsl.md, rule Y3).
            0..=2 => {
                let (a, _) = self.pick();
                let (b, _) = self.pick();
                let (policy, state) = self.policy();
                let v = self.fresh("v");
                let call = if self.rng.chance(50) {
                    format!("unary(&{a})")
                } else {
                    format!("binary(&{a}, &{b})")
                };
                self.line(format!("remat! {{ let {v} = {policy} {v}: {call}; }}"));
                self.vars.push((v, state));
            }
            // A tuple output, destructured.
            3 => {
                let (a, _) = self.pick();
                let (policy, state) = self.policy();
                let (v, w) = (self.fresh("v"), self.fresh("v"));
                self.line(format!(
                    "remat! {{ let ({v}, {w}) = {policy} {v}: pair(&{a}); }}"
                ));
                self.vars.push((v, state));
                self.vars.push((w, state));
            }
            // A `Vec` output, joined by a region (which opens it) or by bare
            // code (after a mark of the whole `Vec`).
            4 => {
                let (a, _) = self.pick();
                let (policy, state) = self.policy();
                let (parts, v) = (self.fresh("parts"), self.fresh("v"));
                self.line(format!(
                    "remat! {{ let {parts} = {policy} {parts}: split(&{a}); }}"
                ));
                if self.rng.chance(50) {
                    self.line(format!(
                        "remat! {{ let {v} = recompute {v}: join(&{parts}); }}"
                    ));
                } else {
                    if state == State::Saved {
                        self.mark(&parts);
                    }
                    self.line(format!("let {v} = Tensor::cat(&{parts}, 0);"));
                }
                self.vars.push((v, State::Plain));
            }
            // Bare code reads one or two values.
            5 => {
                let (a, sa) = self.pick();
                let (b, _) = self.pick();
                let a = self.read(&a, sa);
                let sb = self.state(&b);
                let b = match self.read(&b, sb) {
                    name if !name.contains("needs") => format!("&{name}"),
                    marked => marked,
                };
                let v = self.fresh("v");
                self.line(format!("let {v} = {a}.relu() * 0.5 + {b};"));
                self.vars.push((v, State::Plain));
            }
            // A view of a save output is a save output (docs/dsl.md, rule Y5).
            6 => {
                let saved: Vec<_> = self
                    .vars
                    .iter()
                    .filter(|v| v.1 == State::Saved)
                    .cloned()
                    .collect();
                if let Some((a, _)) = saved.get(self.rng.below(saved.len().max(1))) {
                    let v = self.fresh("v");
                    self.line(format!("let {v} = {a}.transpose(0, 1).transpose(0, 1);"));
                    self.line(format!(
                        "if let Some(t) = {v}.on_forward() {{ let _ = t.sum(Kind::Float); }}"
                    ));
                    self.vars.push((v, State::Saved));
                }
            }
            // A loop carrying a value through save regions.
            7 => {
                let (a, sa) = self.pick();
                let start = self.read(&a, sa);
                let acc = self.fresh("acc");
                self.line(format!("let mut {acc} = {start}.shallow_clone();"));
                self.line("for i in 0..2 {".into());
                self.depth += 1;
                let t = self.fresh("t");
                self.line(format!(
                    "remat! {{ let {t} = save [format!(\"{acc}.{{i}}\")]: unary(&{acc}); }}"
                ));
                self.mark(&t);
                self.line(format!("{acc} = &{acc} * 0.5 + {t};"));
                self.depth -= 1;
                self.line("}".into());
                self.vars.push((acc, State::Plain));
            }
            // A branch whose arms read a save output each, nested `remat!`
            // in one of them.
            _ => {
                let (a, _) = self.pick();
                let v = self.fresh("v");
                let (l, r) = (self.fresh("t"), self.fresh("t"));
                self.line(format!("let {v} = if c {{"));
                self.depth += 1;
                self.line(format!("remat! {{ let {l} = save {l}: unary(&{a}); }}"));
                self.mark(&l);
                self.line(format!("{l} * 2.0"));
                self.depth -= 1;
                self.line("} else {".into());
                self.depth += 1;
                let kept = format!("remat! {{ let {r} = save {r}: binary(&{a}, &{a}); }}");
                self.line(format!(
                    "remat! {{ let {r} = save {r}: binary(&{a}, &{a}); remat! {{ needs {r}; }} }}"
                ));
                self.marks.push((self.lines.len() - 1, Mark::Line(kept)));
                self.line(format!("{r}.sin()"));
                self.depth -= 1;
                self.line("};".into());
                self.vars.push((v, State::Plain));
            }
        }
    }

    /// The value: a save output returned as it is (docs/dsl.md, rule Y4), or bare code
    /// reading the last values.
    fn tail(&mut self) {
        let (last, state) = self.vars.last().cloned().expect("one value at least");
        if state == State::Saved && self.rng.chance(30) {
            self.line(last);
            return;
        }
        let mut terms = Vec::new();
        let n = self.vars.len();
        for i in n.saturating_sub(3)..n {
            let v = self.vars[i].0.clone();
            let read = self.read(&v, self.state(&v));
            let read = match read.contains("needs") {
                true => read,
                false => format!("&{read}"),
            };
            terms.push(format!("({read} * 0.25)"));
        }
        self.line(terms.join(" + "));
    }
}

fn program(rng: &mut Rng) -> Program {
    let mut g = Gen {
        rng,
        lines: Vec::new(),
        marks: Vec::new(),
        vars: vec![("h".into(), State::Plain)],
        pending: Vec::new(),
        next: 0,
        depth: 0,
    };
    g.line("let h = x * 1.0;".into());
    let n = 3 + g.rng.below(6);
    for _ in 0..n {
        g.stmt();
    }
    g.tail();
    Program {
        lines: g.lines,
        marks: g.marks,
    }
}

const HELPERS: &str = r#"use remat::prelude::*;
use tch::{Device, Kind};

fn unary(a: &Tensor) -> Tensor {
    a.tanh() * 1.5
}

fn binary(a: &Tensor, b: &Tensor) -> Tensor {
    a * b.sigmoid()
}

fn pair(a: &Tensor) -> (Tensor, Tensor) {
    (a.exp() * 0.1, a.cos())
}

fn split(a: &Tensor) -> Vec<Tensor> {
    a.chunk(2, 0).into_iter().map(|t| t * 2.0).collect()
}

fn join(parts: &[Tensor]) -> Tensor {
    Tensor::cat(parts, 0)
}
"#;

fn signature(name: &str) -> String {
    format!(
        "#[allow(unused)]\n\
         #[checkpoint(name = \"{name}\", strict = true, enabled = on)]\n\
         fn {name}(x: &Tensor, c: bool, p: Policy, on: bool) -> Tensor {{\n"
    )
}

fn render_pass(seed: u64, programs: &[Program]) -> String {
    let mut out = format!(
        "// Generated by `cargo xtask guarantee` (seed {seed}): do not edit; see\n\
         // xtask/src/guarantee.rs. Each program compiles, so it must recompute\n\
         // under strict recomputation without reading a placeholder, and its\n\
         // gradients must be those of its body without a checkpoint, bitwise.\n\
"
    );
    out.push_str(HELPERS);
    for (k, p) in programs.iter().enumerate() {
        out.push('\n');
        out.push_str(&signature(&format!("program_{k}")));
        for line in &p.lines {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("}\n");
    }
    out.push_str(
        r#"
fn input() -> Tensor {
    (Tensor::arange(12, (Kind::Float, Device::Cpu)).view([4, 3]) * 0.1 - 0.5)
        .set_requires_grad(true)
}

type Program = fn(&Tensor, bool, Policy, bool) -> Tensor;

fn check(name: &str, program: Program) {
    for c in [true, false] {
        for p in [Policy::Save, Policy::Recompute] {
            let run = |on: bool| {
                let x = input();
                let y = program(&x, c, p, on);
                y.sum(Kind::Float).backward();
                (y.detach(), x.grad())
            };
            let (y, g) = run(true);
            let (y0, g0) = run(false);
            assert!(y.equal(&y0), "{name} (c = {c}, p = {p:?}): outputs differ");
            assert!(g.equal(&g0), "{name} (c = {c}, p = {p:?}): gradients differ");
        }
    }
}

fn main() {
"#,
    );
    for k in 0..programs.len() {
        let _ = writeln!(out, "    check(\"program_{k}\", program_{k});");
    }
    out.push_str("}\n");
    out
}

fn render_fail(seed: u64, programs: &[Program]) -> (String, usize) {
    let mut out = format!(
        "// Generated by `cargo xtask guarantee` (seed {seed}): do not edit; see\n\
         // xtask/src/guarantee.rs. Each function is a program of\n\
         // ui-tests/pass/generated_programs.rs with one mark taken away: each\n\
         // must fail to compile.\n\
"
    );
    out.push_str(HELPERS);
    let mut count = 0;
    for (k, p) in programs.iter().enumerate() {
        for (m, (at, mark)) in p.marks.iter().enumerate() {
            out.push('\n');
            out.push_str(&signature(&format!("mutant_{k}_{m}")));
            for (i, text) in p.lines.iter().enumerate() {
                let text = match mark {
                    _ if i != *at => text.clone(),
                    Mark::Line(instead) => {
                        let indent = &text[..text.len() - text.trim_start().len()];
                        format!("{indent}{instead}")
                    }
                    Mark::Expr(read) => {
                        text.replacen(read.as_str(), read.trim_start_matches("::remat::needs"), 1)
                    }
                };
                out.push_str(&text);
                out.push('\n');
            }
            out.push_str("}\n");
            count += 1;
        }
    }
    out.push_str("\nfn main() {}\n");
    (out, count)
}

fn generate(seed: u64, count: usize) -> (String, String, usize) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let programs: Vec<Program> = (0..count).map(|_| program(&mut rng)).collect();
    let pass = render_pass(seed, &programs);
    let (fail, mutants) = render_fail(seed, &programs);
    (pass, fail, mutants)
}

fn write(seed: u64, count: usize) -> Result<usize> {
    let root = repo_root();
    let (pass, fail, mutants) = generate(seed, count);
    fs::write(root.join(PASS_FILE), pass).map_err(|e| format!("writing {PASS_FILE}: {e}"))?;
    fs::write(root.join(FAIL_FILE), fail).map_err(|e| format!("writing {FAIL_FILE}: {e}"))?;
    Ok(mutants)
}

/// `cargo xtask guarantee [--seed S] [--count N]`.
pub(crate) fn guarantee(args: &[String]) -> Result<()> {
    let mut seed = DEFAULT_SEED;
    let mut count = DEFAULT_COUNT;
    let mut out = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let value = it.next().ok_or(format!("{arg} takes a value"))?;
        match arg.as_str() {
            "--seed" => seed = value.parse().map_err(|e| format!("--seed: {e}"))?,
            "--count" => count = value.parse().map_err(|e| format!("--count: {e}"))?,
            "--out" => out = Some(std::path::PathBuf::from(value)),
            _ => {
                return Err(format!(
                    "unknown option {arg}; expected --seed S, --count N or --out DIR"
                ))
            }
        }
    }
    if let Some(dir) = out {
        // Only the files, for reading: nothing is run.
        let (pass, fail, mutants) = generate(seed, count);
        fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        fs::write(dir.join("generated_programs.rs"), pass).map_err(|e| e.to_string())?;
        fs::write(dir.join("generated_mutants.rs"), fail).map_err(|e| e.to_string())?;
        println!(
            "xtask guarantee: {count} programs and {mutants} mutants in {}",
            dir.display()
        );
        return Ok(());
    }
    let root = repo_root();
    let mutants = write(seed, count)?;
    println!("xtask guarantee: {count} programs and {mutants} mutants (seed {seed})");
    let outcome = (|| {
        run(Command::new("cargo").current_dir(&root).args([
            "test",
            "--test",
            "ui_pass",
            "generated_programs",
        ]))?;
        run(Command::new("cargo")
            .current_dir(&root)
            .env("REMAT_UI", "generated_mutants")
            .env("TRYBUILD", "overwrite")
            .args(["test", "--test", "ui"]))?;
        let stderr = fs::read_to_string(root.join(FAIL_FILE.replace(".rs", ".stderr")))
            .map_err(|e| format!("reading the mutants' stderr: {e}"))?;
        let source = fs::read_to_string(root.join(FAIL_FILE))
            .map_err(|e| format!("reading the mutants: {e}"))?;
        let failed = failed_mutants(&source, &stderr);
        let missing: Vec<&str> = mutant_names(&source)
            .filter(|name| !failed.iter().any(|f| f == name))
            .collect();
        if !missing.is_empty() {
            return Err(format!("these mutants compiled: {}", missing.join(", ")));
        }
        println!("xtask guarantee: every program ran clean, every mutant failed to compile");
        Ok(())
    })();
    if (seed, count) != (DEFAULT_SEED, DEFAULT_COUNT) {
        // The committed round back, with its expected errors.
        write(DEFAULT_SEED, DEFAULT_COUNT)?;
        run(Command::new("cargo")
            .current_dir(&root)
            .env("REMAT_UI", "generated_mutants")
            .env("TRYBUILD", "overwrite")
            .args(["test", "--test", "ui"]))?;
    }
    outcome
}

/// The mutants' function names, from their source.
fn mutant_names(source: &str) -> impl Iterator<Item = &str> {
    source
        .lines()
        .filter_map(|l| l.strip_prefix("fn "))
        .filter_map(|l| l.split('(').next())
        .filter(|name| name.starts_with("mutant_"))
}

/// The mutants an error of rustc's points into, from the `.stderr`: each
/// error's location line, matched to the function around that line.
fn failed_mutants(source: &str, stderr: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = Vec::new();
    for l in stderr.lines() {
        let Some(rest) = l.trim_start().strip_prefix("--> ") else {
            continue;
        };
        let Some(line) = rest.split(':').nth(1).and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        if let Some(name) = lines[..line.min(lines.len())]
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix("fn mutant_"))
            .and_then(|l| l.split('(').next())
        {
            out.push(format!("mutant_{name}"));
        }
    }
    out
}
