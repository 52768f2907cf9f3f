//! Lowering control flow to the IR's structured nodes: blocks and their
//! tail values, labelled blocks (joined with the `break`s out of them),
//! `if` and `match` (branches, joined after), `for`, `while` and `loop`
//! (loops, iterated to a fixpoint by the analysis; a `break`'s value is the
//! `loop`'s), closures (loops too: they may run any number of times), and
//! `return`.

use syn::Expr;

use super::{Closure, Lower, Target, TargetKind};
use crate::ast::Mode;
use crate::check::ir::{LocalId, Node, Operand, Proj};
use crate::check::scope::Kind;
use crate::check::vocab::{recomputing_guard, Guard};

impl Lower {
    /// A loop or `if` condition: its `let`s bind for the body, the rest is
    /// read.
    pub(super) fn cond(&mut self, cond: &Expr) {
        match cond {
            Expr::Let(_) => {
                self.value(cond);
            }
            Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
                self.cond(&b.left);
                self.cond(&b.right);
            }
            Expr::Paren(e) => self.cond(&e.expr),
            _ => self.read_expr(cond),
        }
    }

    pub(super) fn block_value(&mut self, block: &syn::Block) -> Operand {
        self.scopes.push();
        let count = block.stmts.len();
        let mut result = Operand::Other;
        for (i, stmt) in block.stmts.iter().enumerate() {
            let tail = i + 1 == count;
            match stmt {
                syn::Stmt::Expr(expr, None) if tail => {
                    let temp = self.temp();
                    self.with_attrs(stmt, |this| {
                        let op = this.value(expr);
                        this.assign_temp(temp, op, false);
                    });
                    result = Operand::Place(temp, Vec::new());
                }
                syn::Stmt::Macro(mac) if tail && mac.semi_token.is_none() => {
                    let temp = self.temp();
                    self.with_attrs(stmt, |this| {
                        let op = this.macro_value(&mac.mac, false);
                        this.assign_temp(temp, op, false);
                    });
                    result = Operand::Place(temp, Vec::new());
                }
                _ => self.stmt(stmt),
            }
        }
        self.scopes.pop();
        result
    }

    /// An `if`; under an `is_recomputing()` guard one arm runs on the
    /// forward only (its reads are not checked, its `needs` count) and the
    /// other on recomputation only (its reads are checked, its `needs` do
    /// nothing: `recompute_needs_tensor` has no effect there).
    pub(super) fn if_value(&mut self, e: &syn::ExprIf) -> Operand {
        let guard = recomputing_guard(&e.cond);
        let temp = self.temp();
        self.scopes.push();
        self.cond(&e.cond);
        let before = self.region_names.clone();
        let (then_forward, else_forward) = match guard {
            Some(Guard::ForwardOnly) => (Some(true), Some(false)),
            Some(Guard::ReplayOnly) => (Some(false), Some(true)),
            None => (None, None),
        };
        let then = self.nodes(|this| {
            this.in_phase(then_forward, |this| {
                let op = this.block_value(&e.then_branch);
                this.assign_temp(temp, op, false);
            });
        });
        self.scopes.pop();
        let after_then = std::mem::replace(&mut self.region_names, before);
        let other = self.nodes(|this| {
            this.in_phase(else_forward, |this| {
                let op = match &e.else_branch {
                    Some((_, else_branch)) => this.value(else_branch),
                    None => Operand::Other,
                };
                this.assign_temp(temp, op, false);
            });
        });
        self.region_names.join(after_then);
        let node = match then_forward {
            Some(true) => Node::Phased {
                forward: then,
                replay: other,
            },
            Some(false) => Node::Phased {
                forward: other,
                replay: then,
            },
            None => Node::Branch(vec![then, other]),
        };
        self.emit(node);
        Operand::Place(temp, Vec::new())
    }

    /// Runs `f` in code that runs on the forward only (`Some(true)`), on
    /// recomputation only (`Some(false)`), or on both.
    fn in_phase(&mut self, forward: Option<bool>, f: impl FnOnce(&mut Self)) {
        let (fwd, replay) = match forward {
            Some(true) => (1, 0),
            Some(false) => (0, 1),
            None => (0, 0),
        };
        self.unchecked += fwd;
        self.replay_only += replay;
        f(self);
        self.unchecked -= fwd;
        self.replay_only -= replay;
    }

    pub(super) fn match_value(&mut self, e: &syn::ExprMatch) -> Operand {
        let referent = self.referent(&e.expr);
        let scrutinee = self.value(&e.expr);
        let temp = self.temp();
        let before = self.region_names.clone();
        let mut after = before.clone();
        let mut arms = Vec::new();
        for arm in &e.arms {
            self.region_names = before.clone();
            let nodes = self.nodes(|this| {
                this.scopes.push();
                this.bind_pat(&arm.pat, scrutinee.clone(), &Kind::Plain);
                if let Some(r) = &referent {
                    this.bind_refs(&arm.pat, r.clone(), true);
                }
                if let Some((_, guard)) = &arm.guard {
                    this.read_expr(guard);
                }
                let op = this.value(&arm.body);
                this.assign_temp(temp, op, false);
                this.scopes.pop();
            });
            arms.push(nodes);
            after.join(std::mem::take(&mut self.region_names));
        }
        self.region_names = after;
        self.emit(Node::Branch(arms));
        Operand::Place(temp, Vec::new())
    }

    pub(super) fn for_value(&mut self, e: &syn::ExprForLoop) -> Operand {
        let referent = self.referent(&e.expr);
        let iter = self.value(&e.expr);
        let label = e.label.as_ref().map(|l| l.name.ident.to_string());
        self.loops += 1;
        self.scopes.push();
        let body = self.within(label.clone(), TargetKind::Loop, None, |this| {
            this.bind_pat(&e.pat, iter.project(Proj::Index(None)), &Kind::Plain);
            if let (Some(name), Some(text)) = (loop_variable(&e.pat), collection_text(&e.expr)) {
                if let Some(id) = this.scopes.resolve(&name) {
                    this.elements_of.insert(id, text);
                }
            }
            // `for e in &mut v`: each `e` points to an element of `v`.
            if let Some(r) = referent {
                this.bind_refs(&e.pat, r, false);
            }
            this.block_stmts(&e.body.stmts);
        });
        self.scopes.pop();
        self.loops -= 1;
        self.emit(Node::Loop { label, body });
        Operand::Other
    }

    /// `while COND { BODY }`: a loop whose body is a branch, `BODY` or
    /// `break`.
    pub(super) fn while_value(&mut self, e: &syn::ExprWhile) -> Operand {
        let label = e.label.as_ref().map(|l| l.name.ident.to_string());
        self.loops += 1;
        self.scopes.push();
        let body = self.within(label.clone(), TargetKind::Loop, None, |this| {
            this.cond(&e.cond);
            let then = this.nodes(|this| {
                this.scopes.push();
                this.block_stmts(&e.body.stmts);
                this.scopes.pop();
            });
            this.emit(Node::Branch(vec![then, vec![Node::Break(None)]]));
        });
        self.scopes.pop();
        self.loops -= 1;
        self.emit(Node::Loop { label, body });
        Operand::Other
    }

    /// `loop { .. }`: its value is what its `break`s carry.
    pub(super) fn loop_value(&mut self, e: &syn::ExprLoop) -> Operand {
        let label = e.label.as_ref().map(|l| l.name.ident.to_string());
        let result = self.temp();
        self.assign_temp(result, Operand::Nothing, false);
        self.loops += 1;
        let body = self.within(label.clone(), TargetKind::Loop, Some(result), |this| {
            this.block_value(&e.body);
        });
        self.loops -= 1;
        self.emit(Node::Loop { label, body });
        Operand::Place(result, Vec::new())
    }

    /// `'b: { .. }`: its value is its tail's or a `break 'b`'s, and the
    /// state after it joins both.
    pub(super) fn labelled_block_value(
        &mut self,
        label: &syn::Label,
        block: &syn::Block,
    ) -> Operand {
        let label = label.name.ident.to_string();
        let result = self.temp();
        let body = self.within(
            Some(label.clone()),
            TargetKind::Block,
            Some(result),
            |this| {
                let op = this.block_value(block);
                this.assign_temp(result, op, false);
            },
        );
        self.emit(Node::Block { label, body });
        Operand::Place(result, Vec::new())
    }

    /// `break 'l VALUE`: the value goes to the construct it leaves (read
    /// where that cannot be found, as before the targets were known).
    pub(super) fn break_value(&mut self, e: &syn::ExprBreak) {
        let label = e.label.as_ref().map(|l| l.ident.to_string());
        if let Some(value) = &e.expr {
            match self.break_target(label.as_deref()) {
                Some(result) => {
                    let op = self.value(value);
                    self.assign_temp(result, op, false);
                }
                None => self.read_expr(value),
            }
        }
        self.emit(Node::Break(label));
    }

    /// The local a `break` with a value assigns: the labelled construct's,
    /// or the innermost loop's; none past a closure.
    fn break_target(&self, label: Option<&str>) -> Option<LocalId> {
        for target in self.targets.iter().rev() {
            if target.kind == TargetKind::Closure {
                return None;
            }
            let hit = match label {
                Some(l) => target.label.as_deref() == Some(l),
                None => target.kind == TargetKind::Loop,
            };
            if hit {
                return target.result;
            }
        }
        None
    }

    /// The nodes `f` emits inside a construct a `break` may leave.
    fn within(
        &mut self,
        label: Option<String>,
        kind: TargetKind,
        result: Option<LocalId>,
        f: impl FnOnce(&mut Self),
    ) -> Vec<Node> {
        self.targets.push(Target {
            label,
            kind,
            result,
        });
        let nodes = self.nodes(f);
        self.targets.pop();
        nodes
    }

    /// A closure may run any number of times, later: its body is lowered as
    /// a loop where it is written (Rust's borrows keep what it captures
    /// from changing meanwhile), its result kept in a local.
    pub(super) fn closure_value(&mut self, c: &syn::ExprClosure) -> Operand {
        let result = self.temp();
        self.closure_count += 1;
        let label = format!("'__remat_closure{}", self.closure_count);
        self.closures.push(Closure {
            label: label.clone(),
            result,
        });
        self.collect.push(Vec::new());
        self.loops += 1;
        self.scopes.push();
        let body = self.within(None, TargetKind::Closure, None, |this| {
            for input in &c.inputs {
                this.bind_pat(input, Operand::Other, &Kind::Plain);
            }
            let op = this.value(&c.body);
            this.assign_temp(result, op, true);
        });
        self.scopes.pop();
        self.loops -= 1;
        self.collect.pop();
        self.closures.pop();
        self.emit(Node::Loop {
            label: Some(label),
            body,
        });
        Operand::Place(result, Vec::new())
    }

    /// `return`: out of the innermost closure, or out of the checked code.
    pub(super) fn returned(&mut self, value: Option<&Expr>) {
        if let Some(closure) = self.closures.last() {
            let (label, result) = (closure.label.clone(), closure.result);
            if let Some(value) = value {
                let op = self.value(value);
                self.assign_temp(result, op, true);
            }
            self.emit(Node::Break(Some(label)));
            return;
        }
        if let Some(value) = value {
            match self.mode {
                // On replay the checkpoint's return value is discarded.
                Mode::Checkpoint => {
                    self.value(value);
                }
                Mode::Block => self.read_expr(value),
            }
        }
        self.emit(Node::Return);
    }
}

/// The name a `for` pattern binds to a whole element (`t`, `&t`, `mut t`).
fn loop_variable(pat: &syn::Pat) -> Option<String> {
    match pat {
        syn::Pat::Ident(p) if p.subpat.is_none() => Some(p.ident.to_string()),
        syn::Pat::Reference(p) => loop_variable(&p.pat),
        syn::Pat::Type(p) => loop_variable(&p.pat),
        syn::Pat::Paren(p) => loop_variable(&p.pat),
        _ => None,
    }
}

/// The collection a `for` loop iterates, as written: `parts` for `&parts`,
/// `parts.iter()` and `s.parts.iter_mut()`'s `s.parts`.
fn collection_text(expr: &syn::Expr) -> Option<String> {
    match crate::check::place::strip(expr) {
        syn::Expr::MethodCall(call)
            if call.args.is_empty()
                && matches!(
                    call.method.to_string().as_str(),
                    "iter" | "iter_mut" | "into_iter"
                ) =>
        {
            crate::check::place::place_text(&call.receiver)
        }
        other => crate::check::place::place_text(other),
    }
}
